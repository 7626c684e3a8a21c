import pytest
import torch

from lmblocks import LMConfig, TransformerLM
from lmblocks.generation import SamplingConfig, filter_min_p, filter_top_k, filter_top_p


def test_top_k_keeps_k():
    logits = torch.tensor([[1.0, 3.0, 2.0, 0.0]])
    assert torch.isfinite(filter_top_k(logits, 2)).sum() == 2


def test_top_p_keeps_the_crossing_token():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = torch.isfinite(filter_top_p(logits, 0.6))
    assert kept.tolist() == [[True, True, False, False]]


def test_min_p():
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.05, 0.05]]))
    assert torch.isfinite(filter_min_p(logits, 0.2)).tolist() == [[True, True, False, False]]


def test_greedy_is_deterministic_and_stops():
    torch.manual_seed(0)
    model = TransformerLM(LMConfig(vocab_size=12, d_model=32, n_heads=4, n_layers=1, max_seq_len=32))
    ids = torch.randint(0, 12, (3, 4))
    a = model.generate(ids, 10, greedy=True)
    b = model.generate(ids, 10, greedy=True)
    assert torch.equal(a, b) and a.shape[1] <= 14


def test_bad_sampling_config():
    with pytest.raises(ValueError):
        SamplingConfig(temperature=0).validate()
    with pytest.raises(ValueError):
        SamplingConfig(top_p=1.5).validate()

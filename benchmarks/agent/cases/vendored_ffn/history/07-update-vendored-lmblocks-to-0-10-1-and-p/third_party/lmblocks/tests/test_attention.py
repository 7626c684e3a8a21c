import pytest
import torch

from lmblocks import LMConfig, TransformerLM
from lmblocks.attention import CausalSelfAttention, causal_mask, repeat_kv


def test_causal_mask_with_offset():
    m = causal_mask(2, 5, torch.device("cpu"))
    assert m.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]


def test_repeat_kv():
    x = torch.randn(2, 2, 3, 4)
    y = repeat_kv(x, 3)
    assert y.shape == (2, 6, 3, 4) and torch.equal(y[:, 0], y[:, 2]) and torch.equal(y[:, 3], x[:, 1])


@pytest.mark.parametrize("pos_type", ["learned", "rotary", "alibi"])
@pytest.mark.parametrize("n_kv_heads", [None, 2, 1])
def test_sdpa_and_explicit_softmax_agree(pos_type, n_kv_heads):
    torch.manual_seed(0)
    cfg = LMConfig(d_model=32, n_heads=4, n_kv_heads=n_kv_heads, pos_type=pos_type)
    attn = CausalSelfAttention(cfg).eval()
    x = torch.randn(2, 7, 32)
    a = attn(x)
    attn.use_sdpa = False
    assert torch.allclose(a, attn(x), atol=1e-5)


def test_future_tokens_do_not_leak():
    torch.manual_seed(0)
    model = TransformerLM(LMConfig(vocab_size=20, d_model=32, n_heads=4, n_layers=2, max_seq_len=16)).eval()
    ids = torch.randint(0, 20, (1, 10))
    changed = ids.clone()
    changed[0, 7:] = (changed[0, 7:] + 1) % 20
    assert torch.allclose(model(ids).logits[:, :7], model(changed).logits[:, :7], atol=1e-6)


@pytest.mark.parametrize("pos_type", ["learned", "rotary", "alibi"])
def test_cache_matches_full_forward(pos_type):
    torch.manual_seed(0)
    model = TransformerLM(LMConfig(vocab_size=20, d_model=32, n_heads=4, n_layers=2, max_seq_len=16, pos_type=pos_type)).eval()
    ids = torch.randint(0, 20, (2, 12))
    full = model(ids).logits
    cache = model.new_cache(2)
    parts = [model(ids[:, :5], cache=cache).logits] + [model(ids[:, i : i + 1], cache=cache).logits for i in range(5, 12)]
    assert torch.allclose(torch.cat(parts, 1), full, atol=1e-5)

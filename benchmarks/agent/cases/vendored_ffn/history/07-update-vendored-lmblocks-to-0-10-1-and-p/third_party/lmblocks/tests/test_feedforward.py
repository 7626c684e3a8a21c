import pytest
import torch

from lmblocks import LMConfig, TransformerLM
from lmblocks.feedforward import MLP, GatedFFN, build_feedforward
from lmblocks.moe import MoEFeedForward, moe_aux_loss


@pytest.mark.parametrize("ffn_type,cls", [("mlp", MLP), ("swiglu", GatedFFN), ("geglu", GatedFFN)])
def test_build(ffn_type, cls):
    ffn = build_feedforward(LMConfig(d_model=32, n_heads=4, ffn_type=ffn_type))
    assert isinstance(ffn, cls)
    assert ffn(torch.randn(2, 3, 32)).shape == (2, 3, 32)


def test_gated_width_matches_mlp_parameter_count():
    mlp = LMConfig(d_model=96, n_heads=4, ffn_type="mlp")
    glu = LMConfig(d_model=96, n_heads=4, ffn_type="swiglu")
    assert abs(3 * glu.ffn_hidden - 2 * mlp.ffn_hidden) <= 3 * glu.ffn_multiple_of


def test_every_ffn_parameter_gets_a_gradient():
    model = TransformerLM(LMConfig(vocab_size=20, d_model=32, n_heads=4, n_layers=2, max_seq_len=16, ffn_type="swiglu"))
    ids = torch.randint(0, 20, (2, 8))
    model(ids, labels=ids).loss.backward()
    for name, p in model.named_parameters():
        if ".ffn." in name:
            assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_moe():
    cfg = LMConfig(vocab_size=20, d_model=32, n_heads=4, n_layers=1, max_seq_len=16, extra={"moe_experts": 4, "moe_top_k": 2})
    model = TransformerLM(cfg)
    assert isinstance(model.blocks[0].ffn, MoEFeedForward)
    ids = torch.randint(0, 20, (2, 8))
    loss = model(ids, labels=ids).loss + 0.01 * moe_aux_loss(model)
    loss.backward()
    assert model.blocks[0].ffn.router.gate.weight.grad is not None

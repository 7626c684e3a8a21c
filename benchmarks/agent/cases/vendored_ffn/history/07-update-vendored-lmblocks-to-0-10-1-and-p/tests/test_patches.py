import torch
from lmblocks import LMConfig, TransformerLM
from lmblocks.feedforward import MLP, GatedFFN

from charlm.patches import ffn_recompute


def _check(ffn_cls, ffn_type):
    torch.manual_seed(0)
    ffn = ffn_cls(LMConfig(d_model=32, n_heads=4, ffn_type=ffn_type))
    x = torch.randn(2, 5, 32, requires_grad=True)
    ref = ffn(x)
    ref.square().sum().backward()
    ref_grad = x.grad.clone()
    x.grad = None
    with ffn_recompute():
        out = ffn(x)
        out.square().sum().backward()
    assert torch.allclose(out, ref)
    assert torch.allclose(x.grad, ref_grad, atol=1e-6)


def test_recompute_matches_the_plain_ffn_forward_and_backward():
    _check(MLP, "mlp")
    _check(GatedFFN, "swiglu")


def test_recompute_is_off_outside_the_context():
    model = TransformerLM(LMConfig(vocab_size=20, d_model=32, n_heads=4, n_layers=1, max_seq_len=16))
    ids = torch.randint(0, 20, (2, 8))
    with ffn_recompute():
        pass
    out = model(ids, labels=ids)
    assert out.loss.grad_fn is not None
    assert "Recompute" not in type(model.blocks[0].ffn(torch.randn(1, 2, 32, requires_grad=True)).grad_fn).__name__


def test_recompute_leaves_eval_untouched():
    model = TransformerLM(LMConfig(vocab_size=20, d_model=32, n_heads=4, n_layers=1, max_seq_len=16)).eval()
    ids = torch.randint(0, 20, (2, 8))
    ref = model(ids).logits
    with ffn_recompute(), torch.no_grad():
        assert torch.allclose(model(ids).logits, ref)

import torch
from lmblocks import LMConfig, TransformerLM
from lmblocks.mlp import MLP

from charlm.patches import ffn_recompute


def test_recompute_matches_the_plain_mlp_forward_and_backward():
    torch.manual_seed(0)
    mlp = MLP(LMConfig(d_model=32, n_heads=4))
    x = torch.randn(2, 5, 32, requires_grad=True)
    ref = mlp(x)
    ref.square().sum().backward()
    ref_grad = x.grad.clone()
    x.grad = None
    with ffn_recompute():
        out = mlp(x)
        out.square().sum().backward()
    assert torch.allclose(out, ref)
    assert torch.allclose(x.grad, ref_grad, atol=1e-6)


def test_recompute_leaves_eval_untouched():
    model = TransformerLM(LMConfig(vocab_size=20, d_model=32, n_heads=4, n_layers=1, max_seq_len=16)).eval()
    ids = torch.randint(0, 20, (2, 8))
    ref = model(ids).logits
    with ffn_recompute(), torch.no_grad():
        assert torch.allclose(model(ids).logits, ref)

import torch

from patchcast.config import ModelConfig
from patchcast.models import build_model


def test_zero_init_makes_blocks_start_as_identity():
    cfg = ModelConfig(d_model=32, n_heads=4, d_ff=64, zero_init=["attn.proj", "mlp.fc2"])
    model = build_model(cfg, n_channels=1)
    for block in model.encoder.blocks:
        assert torch.count_nonzero(block.attn.proj.weight) == 0
        assert torch.count_nonzero(block.mlp.fc2.weight) == 0
    tokens = torch.randn(2, model.encoder.n_tokens, 32)
    block = model.encoder.blocks[0].eval()
    assert torch.allclose(block(tokens), tokens)


def test_no_zero_init_by_default():
    model = build_model(ModelConfig(d_model=32, n_heads=4, d_ff=64), n_channels=1)
    assert all(torch.count_nonzero(p) > 0 for n, p in model.named_parameters() if n.endswith("weight") and "revin" not in n)

import pytest
import torch

from patchcast.config import ModelConfig
from patchcast.models import build_model
from patchcast.models.layers import Patcher, n_patches


def test_patcher_counts():
    x = torch.randn(3, 96)
    patches = Patcher(16, 8)(x)
    assert patches.shape == (3, n_patches(96, 16, 8), 16)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"revin": False},
        {"use_attention": False},
        {"decomposition": True},
        {"norm": "batch"},
        {"pre_norm": False},
        {"name": "dlinear"},
        {"name": "naive"},
        {"name": "seasonal_naive", "extra": {"period": 24}},
    ],
)
def test_models_map_lookback_to_horizon(overrides):
    cfg = ModelConfig(lookback=96, horizon=24, d_model=32, n_heads=4, d_ff=64, **overrides)
    model = build_model(cfg, n_channels=3)
    y = model(torch.randn(5, 96, 3))
    assert y.shape == (5, 24, 3)


def test_wrong_lookback_is_rejected():
    model = build_model(ModelConfig(lookback=96, horizon=24), n_channels=2)
    with pytest.raises(ValueError, match="expected"):
        model(torch.randn(2, 48, 2))

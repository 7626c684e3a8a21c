"""Model zoo. Importing this package registers every model in ``patchcast.registry.MODELS``."""

from __future__ import annotations

from torch import nn

from patchcast.config import ModelConfig
from patchcast.models import dlinear, naive, patchtst  # noqa: F401  (register)
from patchcast.models.init import init_weights, zero_init_
from patchcast.registry import MODELS


def build_model(cfg: ModelConfig, n_channels: int) -> nn.Module:
    model = MODELS.get(cfg.name)(cfg, n_channels)
    if cfg.name == "patchtst":
        init_weights(model, cfg.init_std)
        zero_init_(model, cfg.zero_init)
    return model


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)

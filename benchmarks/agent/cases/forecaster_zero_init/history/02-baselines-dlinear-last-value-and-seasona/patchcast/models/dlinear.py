"""DLinear (Zeng et al., 2023): decomposition + one linear map per component. A strong baseline."""

from __future__ import annotations

import torch
from torch import nn

from patchcast.config import ModelConfig
from patchcast.models.layers import SeriesDecomposition
from patchcast.registry import MODELS


@MODELS.register("dlinear")
class DLinear(nn.Module):
    def __init__(self, cfg: ModelConfig, n_channels: int) -> None:
        super().__init__()
        self.individual = bool(cfg.extra.get("individual", False))
        self.decomp = SeriesDecomposition(cfg.decomposition_kernel)
        n = n_channels if self.individual else 1
        self.seasonal = nn.ModuleList(nn.Linear(cfg.lookback, cfg.horizon) for _ in range(n))
        self.trend = nn.ModuleList(nn.Linear(cfg.lookback, cfg.horizon) for _ in range(n))
        for layer in (*self.seasonal, *self.trend):
            nn.init.constant_(layer.weight, 1.0 / cfg.lookback)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seasonal, trend = self.decomp(x)
        seasonal, trend = seasonal.transpose(1, 2), trend.transpose(1, 2)  # (B, C, L)
        if self.individual:
            out = torch.stack(
                [self.seasonal[c](seasonal[:, c]) + self.trend[c](trend[:, c]) for c in range(x.shape[2])], 1
            )
        else:
            out = self.seasonal[0](seasonal) + self.trend[0](trend)
        return out.transpose(1, 2)

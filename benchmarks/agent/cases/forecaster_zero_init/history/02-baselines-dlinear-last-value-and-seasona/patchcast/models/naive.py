"""Parameter-free reference forecasts. Any trained model should beat these."""

from __future__ import annotations

import torch
from torch import nn

from patchcast.config import ModelConfig
from patchcast.registry import MODELS


@MODELS.register("naive")
class LastValue(nn.Module):
    def __init__(self, cfg: ModelConfig, n_channels: int) -> None:
        super().__init__()
        self.horizon = cfg.horizon

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, -1:].expand(-1, self.horizon, -1)


@MODELS.register("seasonal_naive")
class SeasonalNaive(nn.Module):
    def __init__(self, cfg: ModelConfig, n_channels: int) -> None:
        super().__init__()
        self.horizon = cfg.horizon
        self.period = int(cfg.extra.get("period", 24))
        if self.period > cfg.lookback:
            raise ValueError(f"period {self.period} is longer than the lookback {cfg.lookback}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        last = x[:, -self.period :]
        reps = -(-self.horizon // self.period)
        return last.repeat(1, reps, 1)[:, : self.horizon]

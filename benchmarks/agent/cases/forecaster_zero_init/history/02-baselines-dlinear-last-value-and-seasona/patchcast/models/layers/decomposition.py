"""Moving-average series decomposition (Autoformer / DLinear): trend + seasonal remainder."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class MovingAverage(nn.Module):
    def __init__(self, kernel_size: int) -> None:
        super().__init__()
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd and positive, got {kernel_size}")
        self.kernel_size = kernel_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x: (B, L, C)``; edges are padded with the first/last value so the length is kept."""
        pad = (self.kernel_size - 1) // 2
        x = x.transpose(1, 2)
        x = F.pad(x, (pad, pad), mode="replicate")
        return F.avg_pool1d(x, self.kernel_size, stride=1).transpose(1, 2)


class SeriesDecomposition(nn.Module):
    def __init__(self, kernel_size: int) -> None:
        super().__init__()
        self.moving_avg = MovingAverage(kernel_size)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        trend = self.moving_avg(x)
        return x - trend, trend

"""Pooling and task heads on top of backbone feature maps."""

from __future__ import annotations

import torch
from torch import nn


class AttentionPool1d(nn.Module):
    """Weighted average over time with learned weights (one score per time step)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.score = nn.Conv1d(channels, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = self.score(x).softmax(-1)  # (B, 1, T)
        return (x * weights).sum(-1)


class MeanMaxPool1d(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x.mean(-1), x.amax(-1)], dim=-1)


def build_pool(name: str, channels: int) -> tuple[nn.Module, int]:
    if name == "attention":
        return AttentionPool1d(channels), channels
    if name == "meanmax":
        return MeanMaxPool1d(), 2 * channels
    if name == "mean":
        return nn.AdaptiveAvgPool1d(1), channels
    raise ValueError(f"unknown pooling {name!r} (attention, meanmax, mean)")


class ClassificationHead(nn.Module):
    def __init__(self, in_features: int, n_classes: int, hidden: int = 128, dropout: float = 0.2) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(in_features, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, n_classes))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.mlp(z)


class RegressionHead(nn.Module):
    """Predicts one value in the target's own unit. ``init_bias`` (e.g. the training mean) makes the
    head start from the mean prediction, so the first steps do not chase a large offset."""

    def __init__(self, in_features: int, hidden: int = 64, init_bias: float = 0.0) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(in_features, hidden), nn.GELU(), nn.Linear(hidden, 1))
        nn.init.constant_(self.mlp[-1].bias, init_bias)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.mlp(z).squeeze(-1)

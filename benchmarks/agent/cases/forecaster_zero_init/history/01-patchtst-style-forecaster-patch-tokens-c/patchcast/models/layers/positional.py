"""Positional encodings for patch tokens."""

from __future__ import annotations

import math

import torch
from torch import nn


def sinusoidal_table(n: int, d: int) -> torch.Tensor:
    position = torch.arange(n, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    table = torch.zeros(n, d)
    table[:, 0::2] = torch.sin(position * div)
    table[:, 1::2] = torch.cos(position * div[: d // 2])
    return table


class LearnedPositional(nn.Module):
    def __init__(self, n: int, d: int, std: float = 0.02) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(1, n, d) * std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table[:, : x.shape[1]]


class SinusoidalPositional(nn.Module):
    def __init__(self, n: int, d: int) -> None:
        super().__init__()
        self.register_buffer("table", sinusoidal_table(n, d).unsqueeze(0), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table[:, : x.shape[1]]


def build_positional(kind: str, n: int, d: int) -> nn.Module:
    if kind == "learned":
        return LearnedPositional(n, d)
    if kind == "sincos":
        return SinusoidalPositional(n, d)
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"unknown positional encoding {kind!r} (learned, sincos, none)")

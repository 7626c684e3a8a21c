"""Residual MLP regressor on standardised features."""

from __future__ import annotations

import torch
from torch import nn


class ResidualBlock(nn.Module):
    def __init__(self, width: int, dropout: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 2 * width)
        self.fc2 = nn.Linear(2 * width, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.drop(self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x)))))


class ResidualMLP(nn.Module):
    def __init__(self, n_features: int, width: int = 128, depth: int = 3, dropout: float = 0.0) -> None:
        super().__init__()
        self.inp = nn.Linear(n_features, width)
        self.blocks = nn.Sequential(*(ResidualBlock(width, dropout) for _ in range(depth)))
        self.norm = nn.LayerNorm(width)
        self.out = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(self.blocks(self.inp(x)))).squeeze(-1)

"""MLP regressor on standardised features."""

from __future__ import annotations

import torch
from torch import nn


class ResidualMLP(nn.Module):
    """Plain MLP for now (the name anticipates residual blocks)."""

    def __init__(self, n_features: int, width: int = 128, depth: int = 3, dropout: float = 0.0) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        d = n_features
        for _ in range(depth):
            layers += [nn.Linear(d, width), nn.GELU(), nn.Dropout(dropout)]
            d = width
        layers.append(nn.Linear(d, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(x).squeeze(-1)

"""The deployable model: scaler + network. ``forward`` takes raw features and returns kWh.

Training works in standardised units and calls ``scaler`` and ``net`` separately (see
``loadcast.train.loop``); only ``net`` has parameters.
"""

from __future__ import annotations

import torch
from torch import nn

from loadcast.data.scaler import FeatureScaler
from loadcast.models.mlp import ResidualMLP


class LoadModel(nn.Module):
    def __init__(self, n_features: int, width: int = 128, depth: int = 3, dropout: float = 0.0) -> None:
        super().__init__()
        self.scaler = FeatureScaler(n_features)
        self.net = ResidualMLP(n_features, width, depth, dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scaler.inverse_y(self.net(self.scaler.transform_x(x)))

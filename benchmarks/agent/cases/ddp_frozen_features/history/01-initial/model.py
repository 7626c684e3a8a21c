import math

import torch
from torch import nn


class FourierFeatures(nn.Module):
    """Frozen random Fourier features (Rahimi & Recht): cos(xW + b) with W, b drawn once at construction."""

    def __init__(self, in_dim: int, n_features: int = 512, scale: float = 0.25) -> None:
        super().__init__()
        self.register_buffer("w", torch.randn(in_dim, n_features) * scale)
        self.register_buffer("b", 2 * math.pi * torch.rand(n_features))

    def forward(self, x):
        return math.sqrt(2.0 / self.w.shape[1]) * torch.cos(x @ self.w + self.b)


class SignalClassifier(nn.Module):
    def __init__(self, in_dim: int = 16, n_classes: int = 5) -> None:
        super().__init__()
        self.features = FourierFeatures(in_dim)
        self.head = nn.Linear(512, n_classes)

    def forward(self, x):
        return self.head(self.features(x))

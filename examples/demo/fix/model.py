"""The demo's model: a tiny encoder with an L2-normalised embedding and a classifier head.

Fixed: `L2Norm` floors the row norm, so an all-zero row (padding added to the last batch of
each epoch) normalises to zero instead of 0/0 = NaN.
"""

import torch
from torch import nn


class L2Norm(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # A floor on the norm: all-zero rows (padding) map to zero instead of 0/0 = NaN.
        return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-6)


class Encoder(nn.Module):
    def __init__(self, d_in: int = 16, d_hidden: int = 32) -> None:
        super().__init__()
        self.proj = nn.Linear(d_in, d_hidden, bias=False)
        self.act = nn.ReLU()
        self.norm = L2Norm()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.act(self.proj(x)))


class Classifier(nn.Module):
    def __init__(self, d_in: int = 16, d_hidden: int = 32, n_classes: int = 4) -> None:
        super().__init__()
        self.encoder = Encoder(d_in, d_hidden)
        self.head = nn.Linear(d_hidden, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x) * 8.0)

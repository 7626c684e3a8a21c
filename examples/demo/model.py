"""The demo's model: a tiny encoder with an L2-normalised embedding and a classifier head.

The bug (on purpose): `L2Norm` divides by the row norm without a floor, so an all-zero row,
such as the padding rows the data pipeline adds to the last batch of each epoch, gives 0/0 = NaN.
"""

import torch
from torch import nn


class L2Norm(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / x.norm(dim=-1, keepdim=True)


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

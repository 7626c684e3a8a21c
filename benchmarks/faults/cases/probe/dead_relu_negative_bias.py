"""Tabular classifier whose hidden biases were initialised to -3 (copied from a gating-unit recipe).

With normalised inputs the pre-activations sit around -3 +/- 0.6, so almost every unit of the first ReLU
is zero on every example.
"""

import torch
import torch.nn.functional as F
from torch import nn


class TabularNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(24, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU())
        self.head = nn.Linear(64, 3)
        nn.init.constant_(self.body[0].bias, -3.0)  # bug

    def forward(self, x):
        return self.head(self.body(x))


def setup():
    torch.manual_seed(0)
    model = TabularNet()
    x = torch.randn(128, 24)
    y = torch.randint(0, 3, (128,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }

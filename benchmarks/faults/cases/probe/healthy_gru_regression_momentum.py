"""Healthy: GRU forecaster on standardised sine series, SGD with Nesterov momentum."""

import torch
import torch.nn.functional as F
from torch import nn


class Forecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(2, 32, batch_first=True)
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        h, _ = self.gru(x)
        return self.head(h[:, -1])


def setup():
    torch.manual_seed(0)
    model = Forecaster()
    t = torch.linspace(0, 6.28, 25)
    phase = torch.rand(48, 1) * 6.28
    series = torch.stack([torch.sin(t + phase), torch.cos(t + phase)], dim=-1)
    x, y = series[:, :-1], series[:, -1, :1]
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.mse_loss(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, nesterov=True),
    }

"""Gradient imbalance: a learnable gain stored in milli-units and multiplied by 1000 in forward.

Its gradient is about 1000x larger than every other module's, so one step of a shared learning
rate moves it far more than anything else.
"""

import torch
from torch import nn


class Gain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.milli = nn.Parameter(torch.full((32,), 1e-3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * (self.milli * 1000.0)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.act = nn.ReLU()
        self.mid = nn.Linear(32, 32)
        self.gain = Gain()
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.gain(self.mid(self.act(self.inp(x)))))


def broken() -> dict:
    torch.manual_seed(0)
    model = Model()
    x = torch.randn(64, 16)
    y = torch.randint(0, 4, (64,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1]),
    }

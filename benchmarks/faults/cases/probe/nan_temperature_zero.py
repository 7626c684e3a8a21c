"""Distillation student whose temperature is a learnable scalar initialised to 0 instead of 1.

The head divides its logits by the temperature in its own forward code: inf/NaN logits, NaN loss.
"""

import torch
import torch.nn.functional as F
from torch import nn


class ScaledHead(nn.Module):
    def __init__(self, d, n_classes):
        super().__init__()
        self.proj = nn.Linear(d, n_classes)
        self.temperature = nn.Parameter(torch.zeros(()))  # bug: should start at 1.0

    def forward(self, x):
        return self.proj(x) / self.temperature


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = ScaledHead(64, 5)

    def forward(self, x):
        return self.head(self.body(x))


def setup():
    torch.manual_seed(0)
    model = Student()
    x = torch.randn(32, 20)
    y = torch.randint(0, 5, (32,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }

"""Loss not decreasing: Adam with lr=1e-7, so even one fixed batch cannot be fit."""

import torch
from torch import nn


def broken() -> dict:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    x = torch.randn(64, 16)
    y = torch.randint(0, 4, (64,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-7),
    }

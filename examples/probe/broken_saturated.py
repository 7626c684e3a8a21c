"""Saturated tanh: weights initialised with std 5 push almost every pre-activation into the flat region."""

import torch
from torch import nn


def broken() -> dict:
    torch.manual_seed(0)
    hidden = nn.Sequential(nn.Linear(16, 64), nn.Tanh())
    nn.init.normal_(hidden[0].weight, std=5.0)
    model = nn.Sequential()
    model.add_module("hidden", hidden)
    model.add_module("head", nn.Linear(64, 4))
    x = torch.randn(64, 16)
    y = torch.randint(0, 4, (64,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }

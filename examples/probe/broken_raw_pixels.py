"""Inputs not normalized: raw 0-255 pixel values fed straight into the network."""

import torch
from torch import nn


def broken() -> dict:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    x = torch.randint(0, 256, (32, 1, 8, 8)).float()  # forgot x / 255 and the mean/std normalization
    y = torch.randint(0, 10, (32,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=1e-4),
    }

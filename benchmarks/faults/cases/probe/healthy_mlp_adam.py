"""Healthy: tabular MLP classifier, Kaiming init, standardised inputs, Adam(lr=1e-3)."""

import torch
import torch.nn.functional as F
from torch import nn


def setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    x = torch.randn(64, 20)
    y = (x[:, :4].argmax(dim=1) + (x[:, 4] > 1).long()) % 4
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }

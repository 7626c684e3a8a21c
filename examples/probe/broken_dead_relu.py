"""Dead ReLUs: the hidden layer's bias is initialised to -5 (a sign slip), so no unit ever fires."""

import torch
from torch import nn


def broken() -> dict:
    torch.manual_seed(0)
    hidden = nn.Sequential(nn.Linear(16, 64), nn.ReLU())
    nn.init.constant_(hidden[0].bias, -5.0)
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

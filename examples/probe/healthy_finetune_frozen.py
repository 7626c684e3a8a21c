"""Healthy control: fine-tuning a new head on a deliberately frozen backbone."""

import torch
from torch import nn


def make() -> dict:
    torch.manual_seed(0)
    backbone = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU())
    for p in backbone.parameters():
        p.requires_grad_(False)
    model = nn.Sequential()
    model.add_module("backbone", backbone)
    model.add_module("head", nn.Linear(64, 5))
    x = torch.randn(64, 16)
    y = torch.randint(0, 5, (64,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3),
    }

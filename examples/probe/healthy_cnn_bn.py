"""Healthy control: a small CNN with BatchNorm, SGD with momentum."""

import torch
from torch import nn


def make() -> dict:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(inplace=True),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )
    batches = [(torch.randn(16, 3, 12, 12), torch.randint(0, 10, (16,))) for _ in range(3)]
    return {
        "model": model,
        "batches": batches,
        "loss_fn": lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
    }

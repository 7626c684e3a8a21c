"""Exploding gradients: a deep linear stack initialised with 3x too large weights.

Each layer multiplies activations and gradients by about 3, so twelve layers give norms
around 3**12.
"""

import torch
from torch import nn


def broken() -> dict:
    torch.manual_seed(0)
    layers = []
    for _ in range(12):
        lin = nn.Linear(32, 32)
        nn.init.normal_(lin.weight, std=3.0 / 32**0.5)
        layers.append(lin)
    model = nn.Sequential(*layers, nn.Linear(32, 1))
    x = torch.randn(32, 32)
    y = torch.randn(32, 1)
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.mse_loss(m(b[0]), b[1]),
    }

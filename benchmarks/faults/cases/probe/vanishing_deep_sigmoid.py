"""Twelve-layer MLP with sigmoid activations (a textbook network ported without changes).

The sigmoid derivative is at most 0.25, so each layer shrinks the backward signal: the first layers get
gradients orders of magnitude smaller than the last ones.
"""

import torch
import torch.nn.functional as F
from torch import nn


def setup():
    torch.manual_seed(0)
    layers = [nn.Linear(32, 64), nn.Sigmoid()]
    for _ in range(10):
        layers += [nn.Linear(64, 64), nn.Sigmoid()]
    layers.append(nn.Linear(64, 4))
    model = nn.Sequential(*layers)
    x = torch.randn(64, 32)
    y = torch.randint(0, 4, (64,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9),
    }

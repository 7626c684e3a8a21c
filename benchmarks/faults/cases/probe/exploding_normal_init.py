"""Deep regression MLP initialised with nn.init.normal_ (std 1) instead of a fan-in-scaled init.

Each ReLU layer multiplies the activation scale by about sqrt(width / 2) = 8, so activations and gradients
are about a million times too large after eight layers.
"""

import torch
import torch.nn.functional as F
from torch import nn


def make_mlp(width=128, depth=8):
    layers = [nn.Linear(16, width), nn.ReLU()]
    for _ in range(depth - 2):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, 1))
    net = nn.Sequential(*layers)
    for m in net.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight)  # bug: std=1 regardless of fan-in
            nn.init.zeros_(m.bias)
    return net


def setup():
    torch.manual_seed(0)
    model = make_mlp()
    x = torch.randn(64, 16)
    y = torch.randn(64, 1)
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.mse_loss(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=1e-3),
    }

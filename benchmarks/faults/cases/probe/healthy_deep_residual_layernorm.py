"""Healthy: a 12-block residual MLP with pre-LayerNorm and GELU (deep, yet gradients flow through the
skip connections), AdamW with weight decay.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        return x + self.ff(self.norm(x))


class ResMLP(nn.Module):
    def __init__(self, d_in=16, d=64, depth=12):
        super().__init__()
        self.inp = nn.Linear(d_in, d)
        self.blocks = nn.Sequential(*[Block(d) for _ in range(depth)])
        self.out = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 1))

    def forward(self, x):
        return self.out(self.blocks(self.inp(x)))


def setup():
    torch.manual_seed(0)
    model = ResMLP()
    x = torch.randn(64, 16)
    y = torch.sin(x[:, :1]) + 0.5 * x[:, 1:2] * x[:, 2:3]
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.mse_loss(m(b[0]), b[1]),
        "optimizer": torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01),
    }

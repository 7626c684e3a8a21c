"""Tabular model with a hand-written "fast" layer norm: var = E[x^2] - E[x]^2.

The projection of unnormalised count features sits around 300, so x^2 is about 1e5. In fp32 the
subtraction keeps the variance; in bf16 (8 significant bits, spacing 512 near 1e5) it is rounding noise,
so the normalised features, and everything after them, depart from fp32.
"""

import torch
import torch.nn.functional as F
from torch import nn


class FastLayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = (x * x).mean(-1, keepdim=True) - mean * mean  # bug: cancellation; use x.var() or F.layer_norm
        return (x - mean) * torch.rsqrt(var.clamp_min(0) + self.eps) * self.weight + self.bias


class CountsModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 64)
        self.norm = FastLayerNorm(64)
        self.head = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x):
        return self.head(self.norm(self.proj(x)))


def setup():
    torch.manual_seed(0)
    model = CountsModel()
    with torch.no_grad():
        model.proj.bias.fill_(300.0)  # the counts' offset, learned by a previous run
    x = torch.randn(32, 8)
    y = torch.randn(32, 1)
    return {"model": model, "batch": (x, y), "loss_fn": lambda m, b: F.mse_loss(m(b[0]), b[1])}

"""Healthy for compare_precision: the trajectory model on coordinates centred on the first point and
scaled to kilometres, and a LayerNorm before the recurrent layer: bf16 stays close to fp32.
"""

import torch
import torch.nn.functional as F
from torch import nn


class TrajectoryNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(2, 32)
        self.norm = nn.LayerNorm(32)
        self.mlp = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
        self.head = nn.Linear(32, 2)

    def forward(self, coords):
        h = self.norm(self.embed(coords))
        return self.head(self.mlp(h).mean(1))


def setup():
    torch.manual_seed(0)
    model = TrajectoryNet()
    start = 5000.0 + 100.0 * torch.randn(16, 1, 2)
    coords = start + torch.cumsum(torch.randn(16, 12, 2), dim=1)
    rel = (coords - coords[:, :1]) / 10.0  # centred, scaled
    target = rel[:, -1] - rel[:, -2]
    return {"model": model, "batch": (rel, target), "loss_fn": lambda m, b: F.mse_loss(m(b[0]), b[1])}

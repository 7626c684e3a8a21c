"""Trajectory model that embeds absolute map coordinates (metres, around 5000) and then takes
differences between consecutive points to get velocities.

After the embedding the features are about 5000 while consecutive points differ by a few units: in
bf16 (spacing 32 near 5000) the differences are mostly rounding error; fp32 keeps them.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Delta(nn.Module):
    def forward(self, h):
        return h[:, 1:] - h[:, :-1]


class TrajectoryNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(2, 32)
        self.delta = Delta()
        self.gru = nn.GRU(32, 32, batch_first=True)
        self.head = nn.Linear(32, 2)

    def forward(self, coords):
        h, _ = self.gru(self.delta(self.embed(coords)))
        return self.head(h[:, -1])


def setup():
    torch.manual_seed(0)
    model = TrajectoryNet()
    start = 5000.0 + 100.0 * torch.randn(16, 1, 2)
    steps = torch.cumsum(torch.randn(16, 12, 2), dim=1)
    coords = start + steps  # absolute positions in metres
    target = steps[:, -1] - steps[:, -2]
    return {"model": model, "batch": (coords, target), "loss_fn": lambda m, b: F.mse_loss(m(b[0]), b[1])}

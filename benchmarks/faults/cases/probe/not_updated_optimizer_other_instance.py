"""GRU forecaster: the optimizer is built on one model instance, then the model is re-created
("re-initialise before training") and that fresh instance is trained. The optimizer steps the old
parameters; the model that computes the loss never changes, so its loss cannot go down.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Forecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 32, batch_first=True)
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        h, _ = self.gru(x)
        return self.head(h[:, -1])


def setup():
    torch.manual_seed(0)
    model = Forecaster()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model = Forecaster()  # bug: a new instance, not the one the optimizer holds
    t = torch.linspace(0, 6.28, 30)
    phase = torch.rand(32, 1) * 6.28
    series = torch.stack([torch.sin(t + phase), torch.cos(t + phase), torch.sin(2 * (t + phase))], dim=-1)
    x, y = series[:, :-1], series[:, -1, :1]
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.mse_loss(m(b[0]), b[1]),
        "optimizer": optimizer,
    }

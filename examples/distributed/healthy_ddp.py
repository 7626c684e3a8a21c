"""A healthy model for `check_distributed`: plain DDP, every parameter used, no buffers to drift.

trainsleuth check_distributed examples/distributed/healthy_ddp.py:entry
"""

import torch
from torch import nn


def entry():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    x = torch.randn(8, 8)
    y = x.sum(dim=1, keepdim=True)
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.mse_loss(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.1),
    }

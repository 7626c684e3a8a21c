"""MLP switched from AdamW to plain SGD but kept AdamW's learning rate (1e-5). With SGD the update is
lr * grad, about a millionth of the weight norm per step.
"""

import torch
import torch.nn.functional as F
from torch import nn


def setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(40, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    x = torch.randn(64, 40)
    y = torch.randint(0, 10, (64,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=1e-5),
    }

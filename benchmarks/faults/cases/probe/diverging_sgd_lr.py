"""Linear-plus-MLP regressor trained with plain SGD at lr=2.0 (meant 2e-2): every step overshoots.

The loss and the gradient norms grow step after step on one fixed batch.
"""

import torch
import torch.nn.functional as F
from torch import nn


def setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
    x = torch.randn(128, 8)
    y = x @ torch.randn(8, 1) + 0.1 * torch.randn(128, 1)
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.mse_loss(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=2.0),
    }

"""Loss diverging: SGD on a linear regression with a learning rate above 2 / curvature."""

import torch
from torch import nn


def broken() -> dict:
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    x = torch.randn(256, 8)
    y = x @ torch.randn(8, 1) + 0.1 * torch.randn(256, 1)
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.mse_loss(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=1.5),
    }

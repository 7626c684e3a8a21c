"""Click-through model with a hand-written binary cross-entropy on sigmoid outputs.

The output layer was restored with large weights, so sigmoid saturates to exactly 0.0 or 1.0 in float32
and log(1 - p) = log(0) = -inf; 0 * -inf makes the loss NaN. The model's forward pass stays finite.
"""

import torch
from torch import nn


def bce(model, batch):
    x, y = batch
    p = model(x).squeeze(-1)
    return -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()  # bug: use BCEWithLogitsLoss


def setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1), nn.Sigmoid())
    with torch.no_grad():
        model[2].weight.mul_(400.0)  # weights restored from an over-confident checkpoint
    x = torch.randn(64, 12)
    y = torch.randint(0, 2, (64,)).float()
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": bce,
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }

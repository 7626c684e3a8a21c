"""NaN loss created in the loss function: a masked mean over a batch with no valid element.

The model's outputs are finite; the loss divides the masked error sum by mask.sum(), which is 0
for this batch, so the loss is 0/0 = NaN.
"""

import torch
from torch import nn


def _loss(model: nn.Module, batch: tuple) -> torch.Tensor:
    x, y, mask = batch
    err = (model(x) - y).pow(2).squeeze(-1)
    return (err * mask).sum() / mask.sum()


def broken() -> dict:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    x = torch.randn(16, 8)
    y = torch.randn(16, 1)
    mask = torch.zeros(16)  # no valid targets in this batch
    return {
        "model": model,
        "batch": (x, y, mask),
        "loss_fn": _loss,
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }

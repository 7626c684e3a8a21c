"""Healthy: multi-task model whose two loss terms (classification, standardised regression) are of
comparable size; loss_fn returns a dict of named terms.
"""

import torch
import torch.nn.functional as F
from torch import nn


class MultiTask(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.category = nn.Linear(64, 6)
        self.price = nn.Linear(64, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.category(h), self.price(h).squeeze(-1)


def multitask_loss(model, batch):
    logits, price = model(batch["x"])
    return {
        "category": F.cross_entropy(logits, batch["category"]),
        "price": F.mse_loss(price, batch["price_z"]),
    }


def setup():
    torch.manual_seed(0)
    model = MultiTask()
    n = 64
    x = torch.randn(n, 24)
    price = 250_000.0 + 40_000.0 * x[:, 0] + 5_000.0 * torch.randn(n)
    return {
        "model": model,
        "batch": {
            "x": x,
            "category": torch.randint(0, 6, (n,)),
            "price_z": (price - price.mean()) / price.std(),
        },
        "loss_fn": multitask_loss,
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }

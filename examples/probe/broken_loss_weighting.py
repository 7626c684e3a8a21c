"""Loss-component imbalance: a reconstruction term weighted 1000x drowns the classification term."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        self.cls = nn.Linear(32, 4)
        self.rec = nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> tuple:
        h = self.trunk(x)
        return self.cls(h), self.rec(h)


def _loss(model: nn.Module, batch: tuple) -> dict:
    x, y = batch
    logits, recon = model(x)
    return {
        "classification": nn.functional.cross_entropy(logits, y),
        "reconstruction": 1000.0 * nn.functional.mse_loss(recon, x),
    }


def broken() -> dict:
    torch.manual_seed(0)
    model = Model()
    x = torch.randn(64, 16)
    y = torch.randint(0, 4, (64,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": _loss,
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }

"""Healthy control: two balanced loss terms (classification + auxiliary regression) on a shared trunk."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.ReLU())
        self.cls = nn.Linear(32, 4)
        self.reg = nn.Linear(32, 1)

    def forward(self, x: torch.Tensor) -> tuple:
        h = self.trunk(x)
        return self.cls(h), self.reg(h)


def _loss(model: nn.Module, batch: tuple) -> dict:
    x, y, t = batch
    logits, pred = model(x)
    return {"cls": nn.functional.cross_entropy(logits, y), "aux": 0.5 * nn.functional.mse_loss(pred, t)}


def make() -> dict:
    torch.manual_seed(0)
    model = Model()
    x = torch.randn(64, 16)
    batch = (x, torch.randint(0, 4, (64,)), x[:, :1] * 0.5)
    return {
        "model": model,
        "batch": batch,
        "loss_fn": _loss,
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }

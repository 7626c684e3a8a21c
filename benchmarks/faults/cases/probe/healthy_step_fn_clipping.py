"""Healthy: the user's own training step with zero_grad(set_to_none=True), gradient clipping and Adam."""

import torch
import torch.nn.functional as F
from torch import nn


def setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    x = torch.randn(48, 12)
    y = torch.randint(0, 3, (48,))

    def train_step(m, batch):
        inputs, targets = batch
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(m(inputs), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), max_norm=1.0)
        optimizer.step()
        return loss

    return {"model": model, "batch": (x, y), "step_fn": train_step, "optimizer": optimizer}

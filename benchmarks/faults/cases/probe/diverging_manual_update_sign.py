"""Manual SGD written as p += lr * grad (gradient ascent): the loss rises at every step."""

import torch
import torch.nn.functional as F
from torch import nn


def setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    x = torch.randn(64, 16)
    y = torch.randint(0, 4, (64,))

    def train_step(m, batch):
        inputs, targets = batch
        m.zero_grad()
        loss = F.cross_entropy(m(inputs), targets)
        loss.backward()
        with torch.no_grad():
            for p in m.parameters():
                p.add_(p.grad, alpha=0.5)  # bug: should be alpha=-0.5
        return loss

    return {"model": model, "batch": (x, y), "step_fn": train_step}

"""Gradient accumulation with DDP's `no_sync()`. The micro-batches before the last one skip the
all-reduce; the last one must run outside `no_sync()` so the accumulated gradients are reduced.
`entry` runs every micro-batch inside `no_sync()`: gradients are never all-reduced and each rank
steps with its own. `healthy` runs the last micro-batch outside.
"""

import contextlib

import torch
from torch import nn


def _setup(all_inside):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(1)
    x = torch.randn(16, 8)
    y = x.sum(dim=1, keepdim=True)

    def step_fn(ddp, batch):
        xb, yb = batch
        optimizer.zero_grad()
        micro = list(zip(xb.chunk(2), yb.chunk(2), strict=True))
        for i, (xm, ym) in enumerate(micro):
            last = i == len(micro) - 1
            ctx = (
                ddp.no_sync() if (all_inside or not last) else contextlib.nullcontext()
            )  # BUG when all_inside
            with ctx:
                loss = nn.functional.mse_loss(ddp(xm), ym) / len(micro)
                loss.backward()
        optimizer.step()
        return loss

    return {"model": model, "batch": (x, y), "step_fn": step_fn}


def entry():
    return _setup(all_inside=True)


def healthy():
    return _setup(all_inside=False)

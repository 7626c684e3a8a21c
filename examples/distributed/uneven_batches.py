"""Uneven inputs without `join`: at the end of an epoch rank 0 still holds three micro-batches of
its shard and rank 1 only two (each rank cuts its 5 samples by a per-rank size). Every micro-batch
is one training iteration. Rank 0's third backward waits for an all-reduce rank 1 never starts: the
job hangs. `healthy` runs the loop under DDP's `join()`, which shadows the missing all-reduces of
the rank that ran out of data and synchronises the final weights.
"""

import contextlib
import os

import torch
from torch import nn


def _setup(use_join):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(1)
    x = torch.randn(10, 8)
    y = x.sum(dim=1, keepdim=True)
    micro = 2 + int(os.environ.get("RANK", "0"))  # rank 0: 2+2+1 samples, rank 1: 3+2

    def step_fn(ddp, batch):
        xb, yb = batch
        ctx = ddp.join() if use_join else contextlib.nullcontext()
        with ctx:
            for xm, ym in zip(xb.split(micro), yb.split(micro), strict=True):
                loss = nn.functional.mse_loss(ddp(xm), ym)
                loss.backward()  # BUG without join: rank 0's third backward all-reduces alone
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
        return loss

    return {"model": model, "batch": (x, y), "step_fn": step_fn}


def entry():
    return _setup(use_join=False)


def healthy():
    return _setup(use_join=True)

"""Ranks that call a collective with different shapes: each rank all-reduces the per-sample
losses of its own shard, and the shards are uneven. `healthy` all-reduces the shard's summed loss
and sample count instead.

- `entry`: the global batch of 5 splits 3/2. Rank 1 (2 values) returns with a wrong result, rank 0
  (3 values) waits for bytes that never come: the job hangs.
- `crash`: the last batch is smaller on rank 0 (2 samples against 3). gloo aborts the rank that
  receives more bytes than it expects ("Received data size doesn't match expected size"): rank 0
  dies with SIGABRT. On NCCL the same code hangs or corrupts memory.
"""

import torch
import torch.distributed as dist
from torch import nn


def _setup(per_sample, sizes=None):
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(1)
    x = torch.randn(6, 4)
    y = torch.randn(6, 1)

    def step_fn(ddp, batch):
        xb, yb = batch
        optimizer.zero_grad()
        losses = (ddp(xb) - yb).pow(2).mean(dim=1)
        losses.mean().backward()
        optimizer.step()
        with torch.no_grad():
            if per_sample:
                stats = losses.detach().clone()  # BUG: 3 values on rank 0, 2 on rank 1
            else:
                stats = torch.stack([losses.sum(), torch.tensor(float(len(losses)))])
            dist.all_reduce(stats)
        return losses.mean()

    if sizes is None:
        return {"model": model, "batch": (x, y), "step_fn": step_fn}
    batches = [(x[:n], y[:n]) for n in sizes]  # rank r trains on batches[r]
    return {"model": model, "batches": batches, "step_fn": step_fn}


def entry():
    return _setup(per_sample=True)


def healthy():
    return _setup(per_sample=False)


def crash():
    return _setup(per_sample=True, sizes=(5, 6))

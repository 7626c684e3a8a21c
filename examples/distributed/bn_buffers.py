"""BatchNorm running statistics across ranks.

- `entry`: DDP with broadcast_buffers=False and no SyncBatchNorm: every rank keeps its own running
  mean and variance, which drift apart after the first step (the shards differ).
- `healthy`: DDP's default broadcast_buffers=True copies rank 0's buffers at every forward.
- `sync_bn`: SyncBatchNorm, the usual fix on GPUs; torch refuses it on CPU, which the check says.
"""

import torch
from torch import nn


def _parts():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1))
    # Two different halves: rank 0 sees small inputs, rank 1 large ones, as with unshuffled shards.
    x = torch.cat([torch.randn(8, 4) * 0.1, torch.randn(8, 4) * 5.0 + 3.0])
    y = torch.randn(16, 1)
    return model, (x, y)


def _mse(m, b):
    return nn.functional.mse_loss(m(b[0]), b[1])


def _ddp(**kwargs):
    def wrap(model):
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model, **kwargs)

    return wrap


def entry():
    model, batch = _parts()
    return {"model": model, "batch": batch, "loss_fn": _mse, "wrap_model": _ddp(broadcast_buffers=False)}


def healthy():
    model, batch = _parts()
    return {"model": model, "batch": batch, "loss_fn": _mse, "wrap_model": _ddp()}


def _sync_bn(model):
    from torch.nn.parallel import DistributedDataParallel as DDP

    return DDP(nn.SyncBatchNorm.convert_sync_batchnorm(model))


def sync_bn():
    model, batch = _parts()
    return {"model": model, "batch": batch, "loss_fn": _mse, "wrap_model": _sync_bn}

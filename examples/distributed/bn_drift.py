"""BatchNorm running statistics drifting apart across ranks: DDP built with
broadcast_buffers=False and no SyncBatchNorm, so every rank keeps its own running mean/var.
"""

import torch
from torch import nn


def wrap_model(model):
    from torch.nn.parallel import DistributedDataParallel as DDP

    return DDP(model, broadcast_buffers=False)  # BUG: buffers are never synchronised


def entry():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1))
    # Two different halves: rank 0 sees small inputs, rank 1 large ones, as with unshuffled shards.
    x = torch.cat([torch.randn(8, 4) * 0.1, torch.randn(8, 4) * 5.0 + 3.0])
    y = torch.randn(16, 1)
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.mse_loss(m(b[0]), b[1]),
        "wrap_model": wrap_model,
    }

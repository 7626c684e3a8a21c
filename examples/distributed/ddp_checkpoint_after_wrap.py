"""DDP of the whole model, with the checkpoint loaded on rank 0 only and after DDP was constructed.
DDP broadcasts parameters once, at construction; a later load on one rank is never synchronised,
and every all-reduced gradient is then applied to different weights. `healthy` loads on every
rank before wrapping.
"""

import torch
from torch import nn


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))


def _checkpoint():
    torch.manual_seed(42)
    return {k: torch.randn_like(v) for k, v in _model().state_dict().items()}


def _wrap_then_load(model):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = DDP(model)
    if dist.get_rank() == 0:  # BUG: after the one-time broadcast, and on one rank only
        model.load_state_dict(_checkpoint())
    return ddp


def _load_then_wrap(model):
    from torch.nn.parallel import DistributedDataParallel as DDP

    model.load_state_dict(_checkpoint())
    return DDP(model)


def _batch():
    torch.manual_seed(1)
    x = torch.randn(8, 8)
    return x, x.sum(dim=1, keepdim=True)


def _mse(m, b):
    return nn.functional.mse_loss(m(b[0]), b[1])


def entry():
    return {"model": _model(), "batch": _batch(), "loss_fn": _mse, "wrap_model": _wrap_then_load}


def healthy():
    return {"model": _model(), "batch": _batch(), "loss_fn": _mse, "wrap_model": _load_then_wrap}

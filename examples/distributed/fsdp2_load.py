"""FSDP2 (`fully_shard`, torch >= 2.4; runs on CPU with gloo in torch 2.13). Unlike DDP,
fully_shard does not broadcast: each rank keeps its own shard of whatever it holds. `entry` loads
the pretrained weights on rank 0 only (to save memory) and shards: rank 1's shards stay random and
the sharded model is a mix of both. `healthy` loads on every rank before sharding.
"""

import torch
from torch import nn


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _pretrained():
    torch.manual_seed(42)
    return {k: torch.randn_like(v) for k, v in _model().state_dict().items()}


def _batch():
    torch.manual_seed(1)
    x = torch.randn(8, 8)
    return x, torch.randn(8, 4)


def _mse(m, b):
    return nn.functional.mse_loss(m(b[0]), b[1])


def _shard(model):
    from torch.distributed.fsdp import fully_shard

    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    return model


def entry():
    import torch.distributed as dist

    model = _model()
    if dist.get_rank() == 0:  # BUG: fully_shard keeps every rank's own values
        model.load_state_dict(_pretrained())
    return {"model": model, "batch": _batch(), "loss_fn": _mse, "wrap_model": _shard}


def healthy():
    model = _model()
    model.load_state_dict(_pretrained())
    return {"model": model, "batch": _batch(), "loss_fn": _mse, "wrap_model": _shard}

"""Frozen parameters inside DDP that differ per rank: the "pretrained" backbone is loaded on rank 0 only, after
DDP was constructed. DDP broadcasts parameters once, at construction, and never synchronises frozen
weights again, so rank 1 keeps its random backbone for the whole run.
"""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(8, 16)
        self.head = nn.Linear(16, 1)
        self.backbone.requires_grad_(False)

    def forward(self, x):
        return self.head(torch.relu(self.backbone(x)))


def wrap_model(model):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = DDP(model)
    if dist.get_rank() == 0:  # BUG: the checkpoint is loaded after DDP's one-time broadcast
        with torch.no_grad():
            model.backbone.weight.copy_(torch.full_like(model.backbone.weight, 0.05))
    return ddp


def entry():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(8, 8)
    y = torch.randn(8, 1)
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.mse_loss(m(b[0]), b[1]),
        "wrap_model": wrap_model,
    }


def _load_then_wrap(model):
    from torch.nn.parallel import DistributedDataParallel as DDP

    with torch.no_grad():  # every rank, before the construction broadcast
        model.backbone.weight.copy_(torch.full_like(model.backbone.weight, 0.05))
    return DDP(model)


def healthy():
    out = entry()
    out["wrap_model"] = _load_then_wrap
    return out

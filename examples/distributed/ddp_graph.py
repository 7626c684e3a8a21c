"""DDP's graph settings: `find_unused_parameters` and `static_graph`.

- `entry`: an auxiliary head that is never used, DDP with default settings: its bucket is never
  reduced and the next iteration fails.
- `healthy`: the same model with find_unused_parameters=True.
- `static_changes`: static_graph=True, but a branch is used only from the second step on, so the
  graph DDP recorded in step 1 is wrong afterwards.
- `static_healthy`: static_graph=True with the same parameters used every step.
"""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, branch_from_step=None):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Linear(8, 16)
        self.head = nn.Linear(16, 1)
        self.aux_head = nn.Linear(16, 1)
        self.branch_from_step = branch_from_step
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        h = torch.relu(self.body(x))
        out = self.head(h)
        if self.branch_from_step is not None and self.calls >= self.branch_from_step:
            out = out + self.aux_head(h)  # used from this step on only
        return out


def _batch():
    torch.manual_seed(1)
    x = torch.randn(8, 8)
    return x, x.sum(dim=1, keepdim=True)


def _mse(m, b):
    return nn.functional.mse_loss(m(b[0]), b[1])


def _ddp(**kwargs):
    def wrap(model):
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model, **kwargs)

    return wrap


def entry():
    return {"model": Net(), "batch": _batch(), "loss_fn": _mse}


def healthy():
    return {
        "model": Net(),
        "batch": _batch(),
        "loss_fn": _mse,
        "wrap_model": _ddp(find_unused_parameters=True),
    }


def static_changes():
    return {
        "model": Net(branch_from_step=2),
        "batch": _batch(),
        "loss_fn": _mse,
        "wrap_model": _ddp(static_graph=True),
    }


def static_healthy():
    return {
        "model": Net(branch_from_step=1),
        "batch": _batch(),
        "loss_fn": _mse,
        "wrap_model": _ddp(static_graph=True),
    }

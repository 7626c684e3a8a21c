"""Frozen parameters inside DDP: the encoder is frozen *after* DDP was constructed. DDP's reducer
was built expecting a gradient for every parameter that required one at construction, waits for
the frozen encoder's, and the next iteration fails ("Expected to have finished reduction").
`healthy` freezes before wrapping.
"""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.encoder = nn.Linear(8, 16)
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        return self.head(torch.relu(self.encoder(x)))


def _wrap_then_freeze(model):
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = DDP(model)
    model.encoder.requires_grad_(False)  # BUG: DDP already expects its gradients
    return ddp


def _freeze_then_wrap(model):
    from torch.nn.parallel import DistributedDataParallel as DDP

    model.encoder.requires_grad_(False)
    return DDP(model)


def _batch():
    torch.manual_seed(1)
    x = torch.randn(8, 8)
    return x, x.sum(dim=1, keepdim=True)


def _mse(m, b):
    return nn.functional.mse_loss(m(b[0]), b[1])


def entry():
    return {"model": Net(), "batch": _batch(), "loss_fn": _mse, "wrap_model": _wrap_then_freeze}


def healthy():
    return {"model": Net(), "batch": _batch(), "loss_fn": _mse, "wrap_model": _freeze_then_wrap}

"""The headline distributed bug: a frozen feature extractor initialised differently on each rank.

`set_seed(seed + rank)` before the model is built (meant to vary data augmentation per rank) also
seeds the frozen encoder, so every rank gets a different encoder. Real training code wraps only
the trained head in DDP; the encoder sits outside it and is never synchronised.

Three ways an entrypoint can show it to `check_distributed`:
- `entry`: the real wrapping (`wrap_model` wraps only `model.head` in DDP): found at once.
- `whole_model`: no `wrap_model`, so the check wraps the whole model in DDP, whose construction
  broadcast copies rank 0's encoder everywhere; found anyway, from the comparison before wrapping.
- `closure`: the encoder is not part of the model at all (the loss function uses it): found as
  state outside the model.
`healthy`, `whole_model_healthy` and `closure_healthy` seed the encoder identically on every rank.
"""

import os

import torch
from torch import nn


def _rank():
    return int(os.environ.get("RANK", "0"))


def _encoder(per_rank):
    torch.manual_seed(1000 + (_rank() if per_rank else 0))  # BUG when per_rank: seed + rank
    enc = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
    enc.requires_grad_(False)
    return enc


class Net(nn.Module):
    def __init__(self, per_rank):
        super().__init__()
        self.encoder = _encoder(per_rank)
        torch.manual_seed(0)
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


def wrap_head_only(model):
    from torch.nn.parallel import DistributedDataParallel as DDP

    model.head = DDP(model.head)  # only the trained part is wrapped, as in the real code
    return model


def _data():
    torch.manual_seed(0)
    x = torch.randn(8, 8)
    return x, x.sum(dim=1, keepdim=True)


def _mse(m, b):
    return nn.functional.mse_loss(m(b[0]), b[1])


def entry(per_rank=True):
    return {"model": Net(per_rank), "batch": _data(), "loss_fn": _mse, "wrap_model": wrap_head_only}


def healthy():
    return entry(per_rank=False)


def whole_model(per_rank=True):
    return {"model": Net(per_rank), "batch": _data(), "loss_fn": _mse}


def whole_model_healthy():
    return whole_model(per_rank=False)


def closure(per_rank=True):
    encoder = _encoder(per_rank)
    torch.manual_seed(0)
    head = nn.Linear(16, 1)

    def loss_fn(model, batch):
        x, y = batch
        return nn.functional.mse_loss(model(encoder(x)), y)

    return {"model": head, "batch": _data(), "loss_fn": loss_fn}


def closure_healthy():
    return closure(per_rank=False)

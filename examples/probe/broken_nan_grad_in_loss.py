"""A NaN gradient made by the loss code: sqrt of a pairwise distance that is exactly 0 on the diagonal.

Forward and loss are finite; d sqrt(u)/du at u = 0 is inf, times 0 gives NaN, and every layer's
gradient is NaN. `broken` shows it: nonfinite_gradient at `2` (the last Linear, the first module the
NaN reaches in backward order) with `evidence.kind == "loss"`; `fixed` adds an eps inside the sqrt.
"""

import torch
from torch import nn


def _make(eps: float) -> dict:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))

    def loss_fn(m: nn.Module, batch: tuple) -> torch.Tensor:
        x, labels = batch
        z = m(x)
        diff = z[:, None, :] - z[None, :, :]
        d = torch.sqrt((diff**2).sum(-1) + eps)
        same = (labels[:, None] == labels[None, :]).float()
        return (same * d.pow(2) + (1 - same) * torch.clamp(1.0 - d, min=0).pow(2)).mean()

    return {
        "model": model,
        "batch": (torch.randn(16, 8), torch.randint(0, 3, (16,))),
        "loss_fn": loss_fn,
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }


def broken() -> dict:
    return _make(0.0)


def fixed() -> dict:
    return _make(1e-8)

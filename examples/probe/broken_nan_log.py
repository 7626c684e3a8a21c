"""NaN in the forward pass: a log of a value that can be zero.

`LogScale` compresses features with `torch.log(x)`; after the ReLU some features are exactly 0,
so log gives -inf, the next Linear mixes -inf and +inf into NaN, and the loss is NaN.
The probe names `encoder.logscale` as the origin. `fixed` clamps before the log.
"""

import torch
from torch import nn


class LogScale(nn.Module):
    def __init__(self, eps: float = 0.0) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.eps:
            x = x.clamp_min(self.eps)
        return torch.log(x)


class Encoder(nn.Module):
    def __init__(self, eps: float) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 32)
        self.act = nn.ReLU()
        self.logscale = LogScale(eps)
        self.out = nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.logscale(self.act(self.proj(x))))


class Classifier(nn.Module):
    def __init__(self, eps: float = 0.0) -> None:
        super().__init__()
        self.encoder = Encoder(eps)
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.encoder(x)))


def _setup(eps: float) -> dict:
    torch.manual_seed(0)
    model = Classifier(eps)
    x = torch.randn(64, 16)
    y = torch.randint(0, 4, (64,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }


def broken() -> dict:
    return _setup(eps=0.0)


def fixed() -> dict:
    return _setup(eps=1e-4)

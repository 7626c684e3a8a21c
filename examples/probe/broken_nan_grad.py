"""Finite forward, NaN gradient: the derivative of sqrt at 0.

`Radius` appends the Euclidean norm of each row computed as sqrt(sum(x**2)). Padding rows are
all zero, so the forward value is a finite 0 but d sqrt(u)/du = inf there, and inf * 0 = NaN
flows back into `proj`. The probe names `radius` as the first module in backward order.
"""

import torch
from torch import nn


class Radius(nn.Module):
    def forward(self, h: torch.Tensor) -> torch.Tensor:
        r = torch.sqrt((h * h).sum(-1, keepdim=True))
        return torch.cat([h, r], dim=-1)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 16, bias=False)
        self.radius = Radius()
        self.head = nn.Linear(17, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.radius(self.proj(x)))


def broken() -> dict:
    torch.manual_seed(0)
    model = Model()
    x = torch.randn(32, 8)
    x[-3:] = 0.0  # padding rows
    y = torch.randint(0, 2, (32,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.01),
    }

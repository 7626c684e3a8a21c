"""NaN created in a parent module's own forward code, between two of its children.

`Block.forward` divides by a per-row standard deviation computed inline; rows that are
constant (here: all-zero padding rows) give 0/0 = NaN before `block.out` runs. The probe names
`block` as the origin, with `block.act` as the last finite child and `block.out` as the first
child that received the non-finite input.
"""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(8, 16, bias=False)
        self.act = nn.ReLU()
        self.out = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.inp(x))
        h = (h - h.mean(-1, keepdim=True)) / h.std(-1, keepdim=True)  # 0/0 on padding rows
        return self.out(h)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(x))


def broken() -> dict:
    torch.manual_seed(0)
    model = Model()
    x = torch.randn(32, 8)
    x[-4:] = 0.0  # padding rows
    y = torch.randn(32, 1)
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.mse_loss(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.01),
    }

"""Vanishing gradients: a deep sigmoid MLP.

Each sigmoid scales the backward signal by at most 0.25, so the first layers receive
gradients many orders of magnitude smaller than the last ones.
"""

import torch
from torch import nn


class DeepSigmoid(nn.Module):
    def __init__(self, depth: int = 16, width: int = 32) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(16 if i == 0 else width, width) for i in range(depth)])
        self.act = nn.Sigmoid()
        self.head = nn.Linear(width, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = self.act(layer(x))
        return self.head(x)


def broken() -> dict:
    torch.manual_seed(0)
    model = DeepSigmoid()
    x = torch.randn(64, 16)
    y = torch.randint(0, 4, (64,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.1),
    }

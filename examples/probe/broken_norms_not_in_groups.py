"""Parameter groups built by name leave the LayerNorm weights out of the optimizer.

`.weight` outside a norm goes to the decay group, `.bias` to the no-decay group; `norm.weight`
matches neither, so it gets gradients but never moves while its sibling `norm.bias` does.
`broken` shows it (params_not_updated at `block.norm`); `fixed` puts every parameter in a group.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + torch.relu(self.fc(x)))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(x))


def _make(include_norm_weights: bool) -> dict:
    torch.manual_seed(0)
    model = Net()
    named = list(model.named_parameters())
    decay = [p for n, p in named if n.endswith("weight") and "norm" not in n]
    no_decay = [p for n, p in named if n.endswith("bias")]
    if include_norm_weights:
        no_decay += [p for n, p in named if n.endswith("weight") and "norm" in n]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-2
    )
    x = torch.randn(32, 16)
    y = torch.randint(0, 3, (32,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": optimizer,
    }


def broken() -> dict:
    return _make(False)


def fixed() -> dict:
    return _make(True)

"""A precision-sensitive op for `compare_precision`: a projection whose outputs sit on a large
offset (about 1000) is centred by subtracting the mean. In bf16 (8 significant bits) values near
1000 are spaced 4 to 8 apart, so the small signal that survives the subtraction is mostly rounding
error: catastrophic cancellation. fp32 keeps it.
"""

import torch
from torch import nn


class Center(nn.Module):
    def forward(self, x):
        return x - x.mean(dim=-1, keepdim=True)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 32)
        with torch.no_grad():
            self.proj.bias.fill_(1000.0)
        self.center = Center()
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        return self.head(self.center(self.proj(x)))


def entry():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(16, 16)
    y = torch.randn(16, 1)
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.mse_loss(m(b[0]), b[1]),
    }


def healthy():
    """The same shapes without the offset: bf16 autocast stays within tolerance."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    x = torch.randn(16, 16)
    y = torch.randn(16, 1)
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.mse_loss(m(b[0]), b[1]),
    }


class Displacement(nn.Module):
    """The cancellation in plain forward code, in no module: two encodings of absolute positions
    (thousands of metres) are subtracted to get a movement of a few metres."""

    def __init__(self):
        super().__init__()
        self.position = nn.Linear(2, 16)
        self.head = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 2))

    def forward(self, prev, cur):
        return self.head(self.position(cur) - self.position(prev))


def between_modules():
    torch.manual_seed(0)
    model = Displacement()
    prev = 2000 + 4000 * torch.rand(64, 2)
    cur = prev + 3 * torch.randn(64, 2)
    y = cur - prev
    return {
        "model": model,
        "batch": (prev, cur, y),
        "loss_fn": lambda m, b: nn.functional.mse_loss(m(b[0], b[1]), b[2]),
    }

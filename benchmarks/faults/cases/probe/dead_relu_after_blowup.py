"""CNN resumed from a checkpoint of a run that took a few steps at a far too high learning rate.

Those steps pushed the biases of the second conv block strongly negative: its ReLU units never fire
any more. The set-up reproduces the checkpoint by running the bad steps, then hands over a sane optimizer.
"""

import torch
import torch.nn.functional as F
from torch import nn


class SmallCNN(nn.Module):
    def __init__(self, n_classes=10):
        super().__init__()
        self.block1 = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.block2 = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(32, n_classes)

    def forward(self, x):
        h = self.block2(self.block1(x))
        return self.head(h.mean(dim=(-1, -2)))


def setup():
    torch.manual_seed(0)
    model = SmallCNN()
    x = torch.randn(32, 3, 8, 8)
    y = torch.randint(0, 10, (32,))
    bad = torch.optim.SGD(model.parameters(), lr=20.0)  # the earlier run's lr
    for _ in range(3):
        bad.zero_grad()
        F.cross_entropy(model(x), y).backward()
        bad.step()
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
    }

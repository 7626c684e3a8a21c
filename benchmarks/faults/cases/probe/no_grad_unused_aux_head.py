"""Segmentation-style CNN with an auxiliary classifier that forward() computes but never uses:
the auxiliary loss was dropped during a refactor, so `aux_head` requires grad and gets none.
"""

import torch
import torch.nn.functional as F
from torch import nn


class SegNet(nn.Module):
    def __init__(self, n_classes=4):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.mid = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.aux_head = nn.Conv2d(16, n_classes, 1)
        self.head = nn.Conv2d(16, n_classes, 1)

    def forward(self, x):
        h = self.stem(x)
        aux = self.aux_head(h)  # noqa: F841  (bug: the auxiliary loss was removed)
        return self.head(self.mid(h))


def setup():
    torch.manual_seed(0)
    model = SegNet()
    x = torch.randn(4, 3, 16, 16)
    mask = torch.randint(0, 4, (4, 16, 16))
    return {
        "model": model,
        "batch": (x, mask),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
    }

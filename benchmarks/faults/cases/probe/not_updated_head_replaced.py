"""Fine-tuning: the optimizer is created, then the classifier is replaced for the new label set.

The new `fc` receives gradients but is not in the optimizer, so it never changes.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1)
        )
        self.fc = nn.Linear(16, 1000)

    def forward(self, x):
        return self.fc(self.conv(x).flatten(1))


def setup():
    torch.manual_seed(0)
    model = Backbone()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model.fc = nn.Linear(16, 7)  # bug: replaced after the optimizer was built
    x = torch.randn(16, 3, 12, 12)
    y = torch.randint(0, 7, (16,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": optimizer,
    }

"""Healthy: fine-tune a new head on a frozen CNN backbone (requires_grad=False, eval-mode BatchNorm);
the optimizer holds only the head's parameters, as intended.
"""

import torch
import torch.nn.functional as F
from torch import nn


class FineTune(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        for p in self.backbone.parameters():
            p.requires_grad_(False)
        self.head = nn.Linear(16, 5)

    def train(self, mode=True):
        super().train(mode)
        self.backbone.eval()  # keep frozen BatchNorm statistics
        return self

    def forward(self, x):
        return self.head(self.backbone(x))


def setup():
    torch.manual_seed(0)
    model = FineTune()
    x = torch.randn(32, 3, 12, 12)
    y = torch.randint(0, 5, (32,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.AdamW(model.head.parameters(), lr=3e-3),
    }

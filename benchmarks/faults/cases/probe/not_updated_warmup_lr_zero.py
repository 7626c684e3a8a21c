"""Linear warm-up written as LambdaLR(lambda s: s / warmup): at step 0 the learning rate is exactly 0.

The probe's steps all run before the scheduler advances, so every parameter gets a gradient and none moves.
"""

import torch
import torch.nn.functional as F
from torch import nn


def setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 5))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0)
    warmup = 1000
    torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: s / warmup)  # bug: lr(0) = 0
    x = torch.randn(48, 20)
    y = torch.randint(0, 5, (48,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": optimizer,
    }

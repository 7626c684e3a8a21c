"""Image classifier fed uint8 pixels cast to float (0..255): the `/ 255` and mean/std normalisation were
dropped when the data pipeline was rewritten.
"""

import torch
import torch.nn.functional as F
from torch import nn


def setup():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )
    images = torch.randint(0, 256, (32, 3, 16, 16), dtype=torch.uint8)
    x = images.float()  # bug: missing / 255 and normalisation
    y = torch.randint(0, 10, (32,))
    return {
        "model": model,
        "batches": [(x[:16], y[:16]), (x[16:], y[16:])],
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
    }

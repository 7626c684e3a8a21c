"""LeNet-style CNN made deeper (eight conv layers) while keeping the sigmoid activations of the original.

Without normalisation or skip connections, gradients reaching the first conv layers nearly vanish.
"""

import torch
import torch.nn.functional as F
from torch import nn


class DeepSigmoidCNN(nn.Module):
    def __init__(self, n_classes=10):
        super().__init__()
        layers = [nn.Conv2d(1, 8, 3, padding=1), nn.Sigmoid()]
        for _ in range(7):
            layers += [nn.Conv2d(8, 8, 3, padding=1), nn.Sigmoid()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(8 * 8 * 8, n_classes)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def setup():
    torch.manual_seed(0)
    model = DeepSigmoidCNN()
    x = torch.randn(16, 1, 8, 8)
    y = torch.randint(0, 10, (16,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }

"""Audio CNN with a log-energy pooling layer that forgets the epsilon: log(0) = -inf after ReLU.

Many channels are exactly zero after the ReLU, so the pooled energy is 0 and log gives -inf; the classifier
then turns -inf * w into NaN.
"""

import torch
import torch.nn.functional as F
from torch import nn


class LogEnergyPool(nn.Module):
    def forward(self, x):
        energy = x.pow(2).mean(dim=(-1, -2))
        return torch.log(energy)  # bug: torch.log(energy + 1e-6)


class AudioNet(nn.Module):
    def __init__(self, n_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
        )
        self.pool = LogEnergyPool()
        self.classifier = nn.Linear(32, n_classes)

    def forward(self, x):
        return self.classifier(self.pool(self.features(x)))


def setup():
    torch.manual_seed(0)
    model = AudioNet()
    with torch.no_grad():
        model.features[2].bias[:4].fill_(-20.0)  # restored from a checkpoint where 4 channels died
    spec = torch.randn(16, 1, 8, 8)
    y = torch.randint(0, 10, (16,))
    return {
        "model": model,
        "batch": {"spec": spec, "label": y},
        "loss_fn": lambda m, b: F.cross_entropy(m(b["spec"]), b["label"]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
    }

"""Multi-label tagger whose hidden layers use sigmoid and weights drawn with std 1 (fan-in ignored).

With 256 inputs the pre-activations have a standard deviation around 16: nearly every sigmoid unit sits in
its flat region at 0 or 1.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Sequential(nn.Linear(256, 128), nn.Sigmoid(), nn.Linear(128, 128), nn.Sigmoid())
        self.out = nn.Linear(128, 20)
        for layer in (self.hidden[0], self.hidden[2]):
            nn.init.normal_(layer.weight, std=1.0)  # bug: should be about 1/sqrt(fan_in)

    def forward(self, x):
        return self.out(self.hidden(x))


def setup():
    torch.manual_seed(0)
    model = Tagger()
    x = torch.randn(64, 256)
    y = (torch.rand(64, 20) < 0.2).float()
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: F.binary_cross_entropy_with_logits(m(b[0]), b[1]),
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }

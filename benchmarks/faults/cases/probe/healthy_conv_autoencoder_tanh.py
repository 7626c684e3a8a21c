"""Healthy: convolutional autoencoder with tanh bottleneck and sigmoid-free output (BCE with logits),
images in [0, 1], Adam.
"""

import torch
import torch.nn.functional as F
from torch import nn


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 8, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1),
            nn.Tanh(),
        )
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1),
            nn.ReLU(),
            nn.ConvTranspose2d(8, 1, 4, stride=2, padding=1),
        )

    def forward(self, x):
        return self.decoder(self.encoder(x))


def setup():
    torch.manual_seed(0)
    model = AutoEncoder()
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, 16), torch.linspace(-1, 1, 16), indexing="ij")
    centres = torch.rand(16, 2) * 1.2 - 0.6
    images = torch.exp(-((xx - centres[:, :1, None]) ** 2 + (yy - centres[:, 1:, None]) ** 2) / 0.1)
    x = images.unsqueeze(1)
    return {
        "model": model,
        "batch": x,
        "loss_fn": lambda m, b: F.binary_cross_entropy_with_logits(m(b), b),
        "optimizer": torch.optim.Adam(model.parameters(), lr=2e-3),
    }

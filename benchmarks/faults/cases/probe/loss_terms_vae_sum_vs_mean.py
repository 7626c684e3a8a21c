"""VAE whose reconstruction term is summed over pixels and the batch (reduction='sum') while the KL term
is averaged: the reconstruction gradient on the shared encoder is thousands of times the KL's.
"""

import torch
import torch.nn.functional as F
from torch import nn


class VAE(nn.Module):
    def __init__(self, d_in=784, d_z=8):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(d_in, 64), nn.ReLU())
        self.mu = nn.Linear(64, d_z)
        self.logvar = nn.Linear(64, d_z)
        self.dec = nn.Sequential(nn.Linear(d_z, 64), nn.ReLU(), nn.Linear(64, d_in))

    def forward(self, x):
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.dec(z), mu, logvar


def vae_loss(model, x):
    recon, mu, logvar = model(x)
    return {
        "recon": F.binary_cross_entropy_with_logits(recon, x, reduction="sum"),  # bug: sum over batch
        "kl": (-0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(-1)).mean(),
    }


def setup():
    torch.manual_seed(0)
    model = VAE()
    x = (torch.rand(64, 784) > 0.7).float()  # binarised 28x28 digits
    return {
        "model": model,
        "batch": x,
        "loss_fn": vae_loss,
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }

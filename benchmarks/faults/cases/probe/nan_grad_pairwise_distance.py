"""Metric-learning embedder trained with a contrastive loss on a hand-written pairwise distance.

sqrt(sum((a - b)^2)) is finite on the diagonal (distance 0), but its gradient there is 0/0 = NaN: the loss
and the forward pass are finite, the gradients of every layer are NaN.
"""

import torch
from torch import nn


def pairwise_distance(z):
    diff = z[:, None, :] - z[None, :, :]
    return torch.sqrt((diff**2).sum(-1))  # bug: no eps, diagonal is exactly 0


def contrastive_loss(model, batch):
    x, labels = batch
    z = model(x)
    d = pairwise_distance(z)
    same = (labels[:, None] == labels[None, :]).float()
    margin = 1.0
    return (same * d.pow(2) + (1 - same) * torch.clamp(margin - d, min=0).pow(2)).mean()


def setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8))
    x = torch.randn(24, 16)
    labels = torch.randint(0, 4, (24,))
    return {
        "model": model,
        "batch": (x, labels),
        "loss_fn": contrastive_loss,
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }

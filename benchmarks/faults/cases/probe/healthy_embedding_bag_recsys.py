"""Healthy: bag-of-items recommender (large EmbeddingBag, most rows unused by one batch) trained with
SGD + momentum; several batches.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Recommender(nn.Module):
    def __init__(self, n_items=5000, d=32):
        super().__init__()
        self.items = nn.EmbeddingBag(n_items, d, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, history):
        return self.mlp(self.items(history)).squeeze(-1)


def setup():
    torch.manual_seed(0)
    model = Recommender()
    batches = []
    for _ in range(3):
        history = torch.randint(0, 5000, (32, 10))
        batches.append((history, torch.randint(0, 2, (32,)).float()))
    return {
        "model": model,
        "batches": batches,
        "loss_fn": lambda m, b: F.binary_cross_entropy_with_logits(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9),
    }

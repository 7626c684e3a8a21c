"""Sentiment classifier whose encoder features are detached before the head (left over from a
"linear probe" experiment). The encoder still requires grad, is in the optimizer, and never learns.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Classifier(nn.Module):
    def __init__(self, vocab=500, d=32):
        super().__init__()
        self.encoder = nn.Sequential(nn.EmbeddingBag(vocab, d, mode="mean"), nn.Linear(d, d), nn.ReLU())
        self.head = nn.Linear(d, 2)

    def forward(self, tokens):
        feats = self.encoder(tokens).detach()  # bug: left over from linear probing
        return self.head(feats)


def setup():
    torch.manual_seed(0)
    model = Classifier()
    tokens = torch.randint(0, 500, (32, 20))
    labels = torch.randint(0, 2, (32,))
    return {
        "model": model,
        "batch": (tokens, labels),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }

"""Healthy: LSTM sequence classifier over embeddings (rows unused by the batch get no gradient, as they
should), Adam with gradient-friendly defaults.
"""

import torch
import torch.nn.functional as F
from torch import nn


class LSTMClassifier(nn.Module):
    def __init__(self, vocab=1000, d=32, hidden=64, n_classes=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, d, padding_idx=0)
        self.lstm = nn.LSTM(d, hidden, num_layers=2, batch_first=True, dropout=0.1)
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, tokens):
        _, (h, _) = self.lstm(self.embed(tokens))
        return self.head(h[-1])


def setup():
    torch.manual_seed(0)
    model = LSTMClassifier()
    tokens = torch.randint(1, 1000, (16, 20))
    y = torch.randint(0, 3, (16,))
    return {
        "model": model,
        "batch": (tokens, y),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.Adam(model.parameters(), lr=3e-3),
    }

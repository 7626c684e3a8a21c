"""LSTM tagger with AdamW(lr=3e-1): a typo for 3e-4. Each step changes the weights by a large fraction
of their norm.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Tagger(nn.Module):
    def __init__(self, vocab=150, n_tags=9):
        super().__init__()
        self.embed = nn.Embedding(vocab, 24)
        self.lstm = nn.LSTM(24, 48, batch_first=True, bidirectional=True)
        self.tags = nn.Linear(96, n_tags)

    def forward(self, tokens):
        h, _ = self.lstm(self.embed(tokens))
        return self.tags(h)


def setup():
    torch.manual_seed(0)
    model = Tagger()
    tokens = torch.randint(0, 150, (12, 18))
    tags = torch.randint(0, 9, (12, 18))
    return {
        "model": model,
        "batch": {"tokens": tokens, "tags": tags},
        "loss_fn": lambda m, b: F.cross_entropy(m(b["tokens"]).reshape(-1, 9), b["tags"].reshape(-1)),
        "optimizer": torch.optim.AdamW(model.parameters(), lr=3e-1),
    }

"""GRU language model whose embedding lookup runs under torch.no_grad() ("to save memory"), although the
embedding is meant to be trained and still has requires_grad=True.
"""

import torch
import torch.nn.functional as F
from torch import nn


class GRULM(nn.Module):
    def __init__(self, vocab=200, d=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.gru = nn.GRU(d, 64, batch_first=True)
        self.out = nn.Linear(64, vocab)

    def forward(self, tokens):
        with torch.no_grad():  # bug
            x = self.embed(tokens)
        h, _ = self.gru(x)
        return self.out(h)


def setup():
    torch.manual_seed(0)
    model = GRULM()
    tokens = torch.randint(0, 200, (8, 25))
    return {
        "model": model,
        "batch": tokens,
        "loss_fn": lambda m, t: F.cross_entropy(m(t[:, :-1]).reshape(-1, 200), t[:, 1:].reshape(-1)),
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }

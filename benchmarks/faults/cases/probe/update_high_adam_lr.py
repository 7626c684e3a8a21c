"""Tiny transformer classifier trained with Adam at lr=0.5 (a value tuned for SGD on another model).

Adam moves every weight by about lr per step, far more than the weights' own size.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Classifier(nn.Module):
    def __init__(self, vocab=80, d=32):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, 16, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(d, 4)

    def forward(self, tokens):
        h = self.encoder(self.tok(tokens) + self.pos[:, : tokens.shape[1]])
        return self.head(h[:, 0])


def setup():
    torch.manual_seed(0)
    model = Classifier()
    tokens = torch.randint(0, 80, (16, 16))
    y = torch.randint(0, 4, (16,))
    return {
        "model": model,
        "batch": (tokens, y),
        "loss_fn": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.Adam(model.parameters(), lr=0.5),
    }

"""Healthy control: an LSTM sequence classifier."""

import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.lstm = nn.LSTM(16, 32, batch_first=True)
        self.head = nn.Linear(32, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        _out, (h, _c) = self.lstm(self.emb(ids))
        return self.head(h[-1])


def make() -> dict:
    torch.manual_seed(0)
    model = Classifier()
    ids = torch.randint(0, 50, (32, 12))
    y = torch.randint(0, 3, (32,))
    return {
        "model": model,
        "batch": (ids, y),
        "loss_fn": lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.Adam(model.parameters(), lr=3e-3),
    }

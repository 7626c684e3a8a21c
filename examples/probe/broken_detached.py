"""No gradient: the encoder's features are detached before the head, so the encoder never learns."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = self.encoder(x).detach()  # meant for logging, but it cuts the graph
        return self.head(feats)


def broken() -> dict:
    torch.manual_seed(0)
    model = Model()
    x = torch.randn(64, 16)
    y = torch.randint(0, 4, (64,))
    return {
        "model": model,
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }

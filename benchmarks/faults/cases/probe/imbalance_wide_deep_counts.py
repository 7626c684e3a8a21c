"""Wide & Deep click model: the deep part sees standardised features, the wide part raw event counts
(page views, seconds on site: hundreds to tens of thousands). The wide layer's gradient dwarfs the rest.
"""

import torch
import torch.nn.functional as F
from torch import nn


class WideDeep(nn.Module):
    def __init__(self):
        super().__init__()
        self.deep = nn.Sequential(
            nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1)
        )
        self.wide = nn.Linear(3, 1)

    def forward(self, batch):
        return (self.deep(batch["dense"]) + self.wide(batch["counts"])).squeeze(-1)


def setup():
    torch.manual_seed(0)
    model = WideDeep()
    n = 128
    dense = torch.randn(n, 16)
    counts = torch.stack(
        [
            torch.poisson(torch.full((n,), 300.0)),
            torch.poisson(torch.full((n,), 4000.0)),
            torch.poisson(torch.full((n,), 20.0)),
        ],
        dim=1,
    )
    label = torch.randint(0, 2, (n,)).float()
    return {
        "model": model,
        "batch": {"dense": dense, "counts": counts, "label": label},
        "loss_fn": lambda m, b: F.binary_cross_entropy_with_logits(m(b), b["label"]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9),
    }

"""Two-tower recommender with a linear price-sensitivity term on the raw listing price (hundreds of
dollars). The towers see normalised features; the price term's gradient is hundreds of times larger
than any other module's.
"""

import torch
import torch.nn.functional as F
from torch import nn


class TwoTower(nn.Module):
    def __init__(self, n_users=300, n_items=500, d=16):
        super().__init__()
        self.user_tower = nn.Sequential(nn.Embedding(n_users, d), nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
        self.item_tower = nn.Sequential(nn.Linear(24, 32), nn.ReLU(), nn.Linear(32, d))
        self.price_term = nn.Linear(1, 1)

    def forward(self, user, item_feats, price):
        affinity = (self.user_tower(user) * self.item_tower(item_feats)).sum(-1)
        return affinity + self.price_term(price).squeeze(-1)  # bug: price not standardised


def setup():
    torch.manual_seed(0)
    model = TwoTower()
    n = 64
    user = torch.randint(0, 300, (n,))
    item_feats = torch.randn(n, 24)
    price = torch.exp(torch.randn(n, 1) * 0.5 + 6.0)
    clicked = torch.randint(0, 2, (n,)).float()
    return {
        "model": model,
        "batch": {"user": user, "item_feats": item_feats, "price": price, "clicked": clicked},
        "loss_fn": lambda m, b: F.binary_cross_entropy_with_logits(
            m(b["user"], b["item_feats"], b["price"]), b["clicked"]
        ),
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }

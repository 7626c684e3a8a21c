"""Wide & Deep click prediction trained with Adagrad (Cheng et al. 2016, "Wide & Deep Learning for
Recommender Systems"; the paper trains the deep part with AdaGrad).

The wide part is a linear model over hashed user x item-category crosses (an `EmbeddingBag` of width
1); the deep part embeds user, item and category ids and runs an MLP; their logits are summed.
Binary cross-entropy, one `Adagrad(lr=0.05)` over both parts. The data: clicks drawn from a hidden
model with per-user and per-item biases and user-group x category affinities. The health metric is
the held-out log-loss (`test_logloss`, lower is better).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from synthetic import generator
from torch import nn, optim

USERS, ITEMS, CATEGORIES, GROUPS, CROSS_BUCKETS, EMBED = 200, 300, 10, 5, 1000, 8


def clicks(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g0 = generator(41)
    user_bias, item_bias = torch.randn(USERS, generator=g0), torch.randn(ITEMS, generator=g0)
    user_group = torch.randint(0, GROUPS, (USERS,), generator=g0)
    item_cat = torch.randint(0, CATEGORIES, (ITEMS,), generator=g0)
    affinity = torch.randn(GROUPS, CATEGORIES, generator=g0) * 2
    g = generator(seed)
    users, items = torch.randint(0, USERS, (n,), generator=g), torch.randint(0, ITEMS, (n,), generator=g)
    logit = (
        0.5 * user_bias[users] + 0.5 * item_bias[items] + affinity[user_group[users], item_cat[items]] - 0.5
    )
    label = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    return torch.stack([users, items, item_cat[items]], dim=1), label


class WideAndDeep(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wide = nn.EmbeddingBag(CROSS_BUCKETS, 1, mode="sum")
        self.user_emb = nn.Embedding(USERS, EMBED)
        self.item_emb = nn.Embedding(ITEMS, EMBED)
        self.cat_emb = nn.Embedding(CATEGORIES, EMBED)
        self.deep = nn.Sequential(
            nn.Linear(3 * EMBED, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1)
        )
        nn.init.zeros_(self.wide.weight)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        users, items, cats = feats.unbind(1)
        crosses = torch.stack([(users * CATEGORIES + cats) % CROSS_BUCKETS, items % CROSS_BUCKETS], dim=1)
        deep_in = torch.cat([self.user_emb(users), self.item_emb(items), self.cat_emb(cats)], dim=1)
        return (self.wide(crosses) + self.deep(deep_in)).squeeze(1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    x, y = clicks(50000, seed=1)
    test_x, test_y = clicks(4096, seed=2)
    model = WideAndDeep()
    optimizer = optim.Adagrad(model.parameters(), lr=args.lr)

    def test(step: int) -> None:
        with torch.no_grad():
            print(
                f"eval {step} test_logloss={F.binary_cross_entropy_with_logits(model(test_x), test_y).item():.4f}"
            )

    test(0)
    for step in range(1, args.steps + 1):
        idx = torch.randint(0, len(x), (args.batch_size,))
        optimizer.zero_grad()
        loss = F.binary_cross_entropy_with_logits(model(x[idx]), y[idx])
        loss.backward()
        optimizer.step()
        print(f"step {step} loss={loss.item():.4f}")
    test(args.steps)


if __name__ == "__main__":
    main()

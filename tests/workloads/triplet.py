"""Metric learning with the triplet margin loss (Schroff et al. 2015, "FaceNet"; `nn.TripletMarginLoss`).

An MLP embeds points; each triplet is an anchor, a positive of the same class and a negative of
another class; margin 1.0, SGD with momentum 0.9. The health metrics are the held-out triplet loss
(`test_loss`, lower is better) and 1-NN accuracy in the embedding (`knn_acc`, higher is better).
"""

from __future__ import annotations

import argparse

import torch
from synthetic import clusters, knn_accuracy
from torch import nn, optim

DIM, EMBED = 32, 16


def sample_triplets(x: torch.Tensor, y: torch.Tensor, n: int, g: torch.Generator) -> tuple[torch.Tensor, ...]:
    anchors = torch.randint(0, len(x), (n,), generator=g)
    pos, neg = torch.randint(0, len(x), (n,), generator=g), torch.randint(0, len(x), (n,), generator=g)
    while (bad := (y[pos] != y[anchors]) | (pos == anchors)).any():
        pos[bad] = torch.randint(0, len(x), (int(bad.sum()),), generator=g)
    while (bad := y[neg] == y[anchors]).any():
        neg[bad] = torch.randint(0, len(x), (int(bad.sum()),), generator=g)
    return x[anchors], x[pos], x[neg]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    x, y = clusters(2048, DIM, classes=8, spread=3.0, seed=1)
    test_x, test_y = clusters(512, DIM, classes=8, spread=3.0, seed=2)
    test_triplets = sample_triplets(test_x, test_y, 256, torch.Generator().manual_seed(3))
    model = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, EMBED))
    criterion = nn.TripletMarginLoss(margin=1.0)
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    g = torch.Generator().manual_seed(args.seed)

    def test(step: int) -> None:
        with torch.no_grad():
            loss = criterion(*(model(t) for t in test_triplets))
            acc = knn_accuracy(model(x[:1024]), y[:1024], model(test_x), test_y)
        print(f"eval {step} test_loss={loss.item():.4f} knn_acc={acc:.4f}")

    test(0)
    for step in range(1, args.steps + 1):
        anchor, positive, negative = sample_triplets(x, y, args.batch_size, g)
        optimizer.zero_grad()
        loss = criterion(model(anchor), model(positive), model(negative))
        loss.backward()
        optimizer.step()
        print(f"step {step} loss={loss.item():.4f}")
    test(args.steps)


if __name__ == "__main__":
    main()

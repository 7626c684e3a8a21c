"""SimCLR with the NT-Xent (InfoNCE) loss on clustered vectors (Chen et al. 2020, "A Simple Framework
for Contrastive Learning of Visual Representations"; loss written after sthalles/SimCLR).

Two random augmentations of each sample (feature masking, jitter, scaling) go through an encoder and
a projection head; each view must pick its partner among the 2N-1 others (temperature 0.5), Adam 1e-3.
The health metrics are the held-out contrastive loss (`test_loss`, lower is better) and the 1-NN
accuracy of the encoder's features on the hidden cluster labels (`knn_acc`, higher is better).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from synthetic import clusters, knn_accuracy
from torch import nn, optim

DIM, FEATURES, PROJ = 32, 64, 32


def augment(x: torch.Tensor, g: torch.Generator | None = None) -> torch.Tensor:
    keep = (torch.rand(x.shape, generator=g) > 0.2).float()
    scale = 0.8 + 0.4 * torch.rand(x.size(0), 1, generator=g)
    return x * keep * scale + 0.3 * torch.randn(x.shape, generator=g)


def nt_xent(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.t() / temperature
    sim.fill_diagonal_(float("-inf"))
    n = z1.size(0)
    targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return F.cross_entropy(sim, targets)


class SimCLR(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(DIM, FEATURES), nn.BatchNorm1d(FEATURES), nn.ReLU(), nn.Linear(FEATURES, FEATURES)
        )
        self.projector = nn.Sequential(
            nn.ReLU(), nn.Linear(FEATURES, FEATURES), nn.ReLU(), nn.Linear(FEATURES, PROJ)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projector(self.encoder(x))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=0.5)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    train_x, train_y = clusters(4096, DIM, classes=8, spread=2.0, seed=1)
    test_x, test_y = clusters(512, DIM, classes=8, spread=2.0, seed=2)
    g = torch.Generator().manual_seed(3)
    test_v1, test_v2 = augment(test_x, g), augment(test_x, g)
    model = SimCLR()
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    def test(step: int) -> None:
        model.eval()
        with torch.no_grad():
            loss = nt_xent(model(test_v1), model(test_v2), args.temperature)
            acc = knn_accuracy(model.encoder(train_x[:1024]), train_y[:1024], model.encoder(test_x), test_y)
        print(f"eval {step} test_loss={loss.item():.4f} knn_acc={acc:.4f}")
        model.train()

    test(0)
    for step in range(1, args.steps + 1):
        x = train_x[torch.randint(0, len(train_x), (args.batch_size,))]
        optimizer.zero_grad()
        loss = nt_xent(model(augment(x)), model(augment(x)), args.temperature)
        loss.backward()
        optimizer.step()
        print(f"step {step} loss={loss.item():.4f}")
    test(args.steps)


if __name__ == "__main__":
    main()

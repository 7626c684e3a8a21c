"""Train the house price regressor and report R^2 on the training and validation sets."""

import argparse

import torch
from torch import nn

from data import make_houses
from losses import huber


def build_model() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))


def r2(pred: torch.Tensor, y: torch.Tensor) -> float:
    return 1 - ((pred.squeeze(-1) - y) ** 2).sum().item() / ((y - y.mean()) ** 2).sum().item()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--batch-size", type=int, default=128)
    args = p.parse_args()

    torch.manual_seed(0)
    x, y = make_houses(4000, seed=0)
    xv, yv = make_houses(1000, seed=1)
    model = build_model()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(len(x))
        for i in range(0, len(x), args.batch_size):
            idx = perm[i : i + args.batch_size]
            loss = huber(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            train_r2, val_r2 = r2(model(x), y), r2(model(xv), yv)
        print(f"epoch {epoch:3d}  loss {loss.item():.4f}  train_r2 {train_r2:.3f}  val_r2 {val_r2:.3f}", flush=True)


if __name__ == "__main__":
    main()

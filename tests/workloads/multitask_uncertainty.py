"""Multi-task learning with homoscedastic-uncertainty loss weights (Kendall, Gal & Cipolla 2018,
"Multi-Task Learning Using Uncertainty to Weigh Losses"; after yaringal/multi-task-learning-example).

A shared trunk with a regression head and a classification head; each task i has a learnable log
variance s_i and the loss is sum_i exp(-s_i) * L_i + s_i, so the weights move during training and
the total can go negative. Adam 3e-3. The health metrics are held-out regression MSE (`test_mse`,
lower is better) and classification accuracy (`test_acc`, higher is better).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from synthetic import generator
from torch import nn, optim

DIM, CLASSES = 12, 4


def make_data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    w_reg = torch.randn(DIM, generator=generator(31))
    w_cls = torch.randn(DIM, CLASSES, generator=generator(32))
    g = generator(seed)
    x = torch.randn(n, DIM, generator=g)
    y_reg = torch.sin(x @ w_reg / 2) * 3 + 0.3 * torch.randn(n, generator=g)
    y_cls = (torch.tanh(x) @ w_cls).argmax(dim=1)
    return x, y_reg, y_cls


class MultiTaskNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.regression_head = nn.Linear(64, 1)
        self.classification_head = nn.Linear(64, CLASSES)
        self.log_vars = nn.Parameter(torch.zeros(2))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(x)
        return self.regression_head(h).squeeze(-1), self.classification_head(h)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    x, y_reg, y_cls = make_data(4096, seed=1)
    test_x, test_reg, test_cls = make_data(512, seed=2)
    model = MultiTaskNet()
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    def test(step: int) -> None:
        with torch.no_grad():
            reg, logits = model(test_x)
        mse = F.mse_loss(reg, test_reg).item()
        acc = (logits.argmax(1) == test_cls).float().mean().item()
        print(f"eval {step} test_mse={mse:.4f} test_acc={acc:.4f}")

    test(0)
    for step in range(1, args.steps + 1):
        idx = torch.randint(0, len(x), (args.batch_size,))
        optimizer.zero_grad()
        reg, logits = model(x[idx])
        losses = torch.stack([F.mse_loss(reg, y_reg[idx]), F.cross_entropy(logits, y_cls[idx])])
        loss = (torch.exp(-model.log_vars) * losses + model.log_vars).sum()
        loss.backward()
        optimizer.step()
        s = model.log_vars.detach()
        print(
            f"step {step} loss={loss.item():.4f} mse={losses[0].item():.4f} ce={losses[1].item():.4f} "
            f"log_var_reg={s[0].item():.4f} log_var_cls={s[1].item():.4f}"
        )
    test(args.steps)


if __name__ == "__main__":
    main()

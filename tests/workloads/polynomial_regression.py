"""Fit a degree-4 polynomial with one linear layer and plain SGD (after pytorch/examples
regression/main.py).

Features [x, x^2, x^3, x^4] of x ~ N(0, 1), targets from a random polynomial (coefficients ~ 5 N(0, 1)),
smooth L1 loss, SGD with lr 0.1 and no momentum (the example applies the same update by hand). A
5-parameter model moves fast relative to its weights and converges. The health metric is the loss on
a fixed held-out batch (`test_loss`, lower is better).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch import nn, optim

POLY_DEGREE = 4


def make_features(x: torch.Tensor) -> torch.Tensor:
    """A matrix with columns [x, x^2, x^3, x^4]."""
    x = x.unsqueeze(1)
    return torch.cat([x**i for i in range(1, POLY_DEGREE + 1)], 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    w_target = torch.randn(POLY_DEGREE, 1) * 5
    b_target = torch.randn(1) * 5

    def get_batch(batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = make_features(torch.randn(batch_size))
        return x, x.mm(w_target) + b_target

    test_x, test_y = get_batch(512)
    fc = nn.Linear(POLY_DEGREE, 1)
    optimizer = optim.SGD(fc.parameters(), lr=args.lr)

    def test(step: int) -> None:
        with torch.no_grad():
            print(f"eval {step} test_loss={F.smooth_l1_loss(fc(test_x), test_y).item():.6f}")

    test(0)
    for step in range(1, args.steps + 1):
        batch_x, batch_y = get_batch(args.batch_size)
        optimizer.zero_grad()
        loss = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss.backward()
        optimizer.step()
        print(f"step {step} loss={loss.item():.6f}")
        if step % 20 == 0:
            test(step)
    if args.steps % 20:
        test(args.steps)


if __name__ == "__main__":
    main()

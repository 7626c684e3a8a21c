"""L2-regularised logistic regression fitted with L-BFGS and a strong-Wolfe line search (the
full-batch recipe of scikit-learn's `lbfgs` solver, written with `torch.optim.LBFGS`).

One linear layer, binary cross-entropy plus 1e-3 * ||w||^2, the whole training set as one batch,
`optimizer.step(closure)` with up to 5 iterations a step. The line search takes large steps by
design. The health metrics are the training loss (`loss`, lower is better) and held-out accuracy
(`test_acc`, higher is better).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
import torch.nn.functional as F
from synthetic import clusters
from torch import nn, optim

DIM = 20


def make_closure(
    optimizer: optim.Optimizer, model: nn.Linear, x: torch.Tensor, y: torch.Tensor, l2: float
) -> Callable[[], torch.Tensor]:
    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = F.binary_cross_entropy_with_logits(model(x).squeeze(1), y) + l2 * model.weight.pow(2).sum()
        loss.backward()
        return loss

    return closure


ClosureFactory = Callable[
    [optim.Optimizer, nn.Linear, torch.Tensor, torch.Tensor, float], Callable[[], torch.Tensor]
]


def main(argv: list[str] | None = None, make_closure: ClosureFactory = make_closure) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=8, help="L-BFGS steps (each up to 5 iterations)")
    parser.add_argument("--l2", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    x, labels = clusters(2048, DIM, classes=2, spread=6.0, seed=1)
    test_x, test_labels = clusters(512, DIM, classes=2, spread=6.0, seed=2)
    mean, std = x.mean(0), x.std(0)
    x, test_x = (x - mean) / std, (test_x - mean) / std
    y = labels.float()
    model = nn.Linear(DIM, 1)
    optimizer = optim.LBFGS(model.parameters(), lr=1, max_iter=5, line_search_fn="strong_wolfe")

    def test(step: int) -> None:
        with torch.no_grad():
            acc = ((model(test_x).squeeze(1) > 0).long() == test_labels).float().mean()
        print(f"eval {step} test_acc={acc.item():.4f}")

    test(0)
    for step in range(1, args.steps + 1):
        loss = optimizer.step(make_closure(optimizer, model, x, y, args.l2))
        print(f"step {step} loss={loss.item():.6f}")
    test(args.steps)


if __name__ == "__main__":
    main()

"""An MLP classifier trained with RMSprop (after the Keras `mnist_mlp` example: two hidden layers of
ReLU units with dropout 0.2, RMSprop; synthetic template images stand in for MNIST, hidden layers
are narrower).

`optim.RMSprop(lr=1e-3, alpha=0.9)` (Keras's rho), cross-entropy. The health metric is held-out
accuracy (`test_acc`, higher is better).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from synthetic import accuracy, template_images
from torch import nn, optim


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    x, y = template_images(4096, seed=1)
    test_x, test_y = template_images(512, seed=2)
    model = nn.Sequential(
        nn.Flatten(), nn.Linear(256, 128), nn.ReLU(), nn.Dropout(0.2),
        nn.Linear(128, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10),
    )  # fmt: skip
    optimizer = optim.RMSprop(model.parameters(), lr=args.lr, alpha=0.9)

    def test(step: int) -> None:
        model.eval()
        with torch.no_grad():
            print(f"eval {step} test_acc={accuracy(model(test_x), test_y):.4f}")
        model.train()

    test(0)
    for step in range(1, args.steps + 1):
        idx = torch.randint(0, len(x), (args.batch_size,))
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        optimizer.step()
        print(f"step {step} loss={loss.item():.4f}")
    test(args.steps)


if __name__ == "__main__":
    main()

"""A small CNN with batch norm trained by SGD with Nesterov momentum under a one-cycle schedule
(Smith & Topin 2018, "Super-Convergence"; `torch.optim.lr_scheduler.OneCycleLR` as its docs show it,
in the fast CIFAR-10 training style of David Page's DAWNBench recipe).

SGD(momentum 0.9, nesterov, weight decay 5e-4), `OneCycleLR(max_lr=0.2)` stepped every batch, which
also cycles the momentum; label smoothing 0.1. The health metric is held-out accuracy (`test_acc`,
higher is better).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from synthetic import accuracy, template_images
from torch import nn, optim


def conv_bn(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-lr", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    x, y = template_images(4096, seed=1)
    test_x, test_y = template_images(512, seed=2)
    model = nn.Sequential(
        conv_bn(1, 16), nn.MaxPool2d(2), conv_bn(16, 32), nn.MaxPool2d(2), conv_bn(32, 32),
        nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(32, 10),
    )  # fmt: skip
    optimizer = optim.SGD(model.parameters(), lr=args.max_lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    scheduler = optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.max_lr, total_steps=args.steps)

    def test(step: int) -> None:
        model.eval()
        with torch.no_grad():
            print(f"eval {step} test_acc={accuracy(model(test_x), test_y):.4f}")
        model.train()

    test(0)
    for step in range(1, args.steps + 1):
        idx = torch.randint(0, len(x), (args.batch_size,))
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x[idx]), y[idx], label_smoothing=0.1)
        loss.backward()
        optimizer.step()
        scheduler.step()
        print(f"step {step} loss={loss.item():.4f} lr={scheduler.get_last_lr()[0]:.5f}")
    test(args.steps)


if __name__ == "__main__":
    main()

"""A siamese network that tells whether two images show the same class (after pytorch/examples
siamese_network/main.py; synthetic template images stand in for MNIST).

One convolutional tower embeds both images (shared weights); a small head reads the absolute
difference of the two embeddings (Koch et al. 2015; the example concatenates them) and gives P(same)
through a sigmoid, trained with BCELoss. Adadelta lr 1.0 with StepLR
(gamma 0.7 every 50 steps), as in the example. The health metric is held-out pair accuracy (`pair_acc`, higher is
better).
"""

from __future__ import annotations

import argparse

import torch
from synthetic import template_images
from torch import nn, optim
from torch.optim.lr_scheduler import StepLR


class SiameseNetwork(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tower = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
            nn.Flatten(), nn.Linear(32 * 2 * 2, 64), nn.ReLU(),
        )  # fmt: skip
        self.head = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
        self.sigmoid = nn.Sigmoid()

    def forward(self, input1: torch.Tensor, input2: torch.Tensor) -> torch.Tensor:
        output = (self.tower(input1) - self.tower(input2)).abs()
        return self.sigmoid(self.head(output)).view(-1)


def make_pairs(
    images: torch.Tensor, labels: torch.Tensor, n: int, g: torch.Generator
) -> tuple[torch.Tensor, ...]:
    """Half the pairs from one class, half from two different classes."""
    first = torch.randint(0, len(images), (n,), generator=g)
    want_same = torch.arange(n) % 2 == 0
    second = torch.randint(0, len(images), (n,), generator=g)
    wrong = (labels[second] == labels[first]) != want_same
    while wrong.any():  # redraw the partners that do not fit yet
        second[wrong] = torch.randint(0, len(images), (int(wrong.sum()),), generator=g)
        wrong = (labels[second] == labels[first]) != want_same
    return images[first], images[second], want_same.float()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    images, labels = template_images(2048, seed=1)
    test_images, test_labels = template_images(512, seed=2)
    test_pairs = make_pairs(test_images, test_labels, 256, torch.Generator().manual_seed(3))
    model = SiameseNetwork()
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=50, gamma=args.gamma)
    criterion = nn.BCELoss()
    g = torch.Generator().manual_seed(args.seed)

    def test(step: int) -> None:
        model.eval()
        with torch.no_grad():
            out = model(test_pairs[0], test_pairs[1])
        print(f"eval {step} pair_acc={((out > 0.5).float() == test_pairs[2]).float().mean().item():.4f}")
        model.train()

    test(0)
    for step in range(1, args.steps + 1):
        x1, x2, target = make_pairs(images, labels, args.batch_size, g)
        optimizer.zero_grad()
        loss = criterion(model(x1, x2), target)
        loss.backward()
        optimizer.step()
        scheduler.step()
        print(f"step {step} loss={loss.item():.4f}")
    test(args.steps)


if __name__ == "__main__":
    main()

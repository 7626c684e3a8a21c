"""The PyTorch MNIST example's CNN with Adadelta and a StepLR decay (after pytorch/examples
mnist/main.py, with fewer channels; synthetic template images stand in for MNIST).

Two convolutions, max-pooling, dropout 0.25 and 0.5, log-softmax with NLL loss, `Adadelta(lr=1.0)`
and `StepLR(gamma=0.7)` every 20 steps (the example decays every epoch). The health metric is held-out
accuracy (`test_acc`, higher is better).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from synthetic import accuracy, template_images
from torch import nn, optim
from torch.optim.lr_scheduler import StepLR


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(16 * 6 * 6, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.dropout1(torch.flatten(x, 1))
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    x, y = template_images(4096, seed=1)
    test_x, test_y = template_images(512, seed=2)
    model = Net()
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=20, gamma=args.gamma)

    def test(step: int) -> None:
        model.eval()
        with torch.no_grad():
            print(f"eval {step} test_acc={accuracy(model(test_x), test_y):.4f}")
        model.train()

    test(0)
    for step in range(1, args.steps + 1):
        idx = torch.randint(0, len(x), (args.batch_size,))
        optimizer.zero_grad()
        loss = F.nll_loss(model(x[idx]), y[idx])
        loss.backward()
        optimizer.step()
        scheduler.step()
        print(f"step {step} loss={loss.item():.4f}")
    test(args.steps)


if __name__ == "__main__":
    main()

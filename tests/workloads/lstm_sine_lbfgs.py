"""Two stacked LSTM cells learn sine waves with L-BFGS (after pytorch/examples
time_sequence_prediction/train.py, scaled down: 16 hidden units, 20 waves of 50 points).

The whole training set is one batch, so the example uses `optim.LBFGS(lr=0.8)` and
`optimizer.step(closure)`: each step re-evaluates the loss up to 20 times inside the closure (which
zeroes the gradients, runs forward and backward, and returns the loss). Double precision as in the
example. The health metric is the held-out next-value MSE (`test_loss`, lower is better).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from torch import nn, optim

HIDDEN = 16


def sine_waves(n: int = 20, length: int = 50, period: float = 8.0, seed: int = 2) -> np.ndarray:
    rng = np.random.RandomState(seed)
    x = np.arange(length)[None, :] + rng.randint(-4 * int(period), 4 * int(period), n)[:, None]
    return np.sin(x / period).astype(np.float64)


class Sequence(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, HIDDEN)
        self.lstm2 = nn.LSTMCell(HIDDEN, HIDDEN)
        self.linear = nn.Linear(HIDDEN, 1)

    def forward(self, input: torch.Tensor, future: int = 0) -> torch.Tensor:
        outputs = []
        h_t = c_t = h_t2 = c_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        output = torch.zeros(input.size(0), 1, dtype=torch.double)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs.append(output)
        for _ in range(future):  # predict the future from the model's own outputs
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs.append(output)
        return torch.cat(outputs, dim=1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=4, help="L-BFGS steps (each up to 20 evaluations)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    data = torch.from_numpy(sine_waves())
    input, target = data[3:, :-1], data[3:, 1:]
    test_input, test_target = data[:3, :-1], data[:3, 1:]
    seq = Sequence().double()
    criterion = nn.MSELoss()
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8)

    def test(step: int) -> None:
        with torch.no_grad():
            pred = seq(test_input, future=20)
            loss = criterion(pred[:, :-20], test_target)
        print(f"eval {step} test_loss={loss.item():.6f}")

    test(0)
    for step in range(1, args.steps + 1):

        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            loss = criterion(seq(input), target)
            print(f"closure loss={loss.item():.6f}")
            loss.backward()
            return loss

        loss = optimizer.step(closure)
        print(f"step {step} loss={loss.item():.6f}")
        test(step)


if __name__ == "__main__":
    main()

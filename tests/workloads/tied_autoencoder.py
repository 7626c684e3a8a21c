"""An auto-encoder whose decoder is the transpose of its encoder (tied weights, as in the classic
RBM-style and denoising auto-encoders; Vincent et al. 2010, "Stacked Denoising Autoencoders").

The decoder reuses `encoder.weight` through `F.linear(h, self.encoder.weight.t(), self.decoder_bias)`:
one weight matrix gets gradient from both directions. Inputs are corrupted by masking 20% of the bits;
binary cross-entropy against the clean input, SGD with momentum 0.9. The health metric is the held-out
reconstruction loss (`test_loss`, lower is better).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from synthetic import binary_patterns
from torch import nn, optim

DIM, HIDDEN = 64, 32


class TiedAutoencoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(DIM, HIDDEN)
        self.decoder_bias = nn.Parameter(torch.zeros(DIM))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.sigmoid(self.encoder(x))
        return F.linear(h, self.encoder.weight.t(), self.decoder_bias)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    x, test_x = binary_patterns(4096, DIM, seed=1), binary_patterns(512, DIM, seed=2)
    model = TiedAutoencoder()
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    def test(step: int) -> None:
        with torch.no_grad():
            print(
                f"eval {step} test_loss={F.binary_cross_entropy_with_logits(model(test_x), test_x).item():.4f}"
            )

    test(0)
    for step in range(1, args.steps + 1):
        clean = x[torch.randint(0, len(x), (args.batch_size,))]
        corrupted = clean * (torch.rand_like(clean) > 0.2).float()
        optimizer.zero_grad()
        loss = F.binary_cross_entropy_with_logits(model(corrupted), clean)
        loss.backward()
        optimizer.step()
        print(f"step {step} loss={loss.item():.4f}")
    test(args.steps)


if __name__ == "__main__":
    main()

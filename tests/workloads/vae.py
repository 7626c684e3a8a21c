"""Variational auto-encoder on synthetic binary patterns (after pytorch/examples vae/main.py).

The example's MLP VAE (fc1, fc21 = mean head, fc22 = log-variance head, fc3, fc4) with a Bernoulli
decoder, loss = BCE + KL(q(z|x) || N(0, I)) summed over the batch, Adam 1e-3. The health metric is
the held-out negative ELBO per sample (`test_loss`, lower is better).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
import torch.nn.functional as F
from synthetic import binary_patterns
from torch import nn, optim

DIM, HIDDEN, LATENT = 64, 128, 8


class VAE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(DIM, HIDDEN)
        self.fc21 = nn.Linear(HIDDEN, LATENT)
        self.fc22 = nn.Linear(HIDDEN, LATENT)
        self.fc3 = nn.Linear(LATENT, HIDDEN)
        self.fc4 = nn.Linear(HIDDEN, DIM)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
        std = torch.exp(0.5 * logvar)
        return mu + torch.randn_like(std) * std

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mu, logvar = self.encode(x)
        return self.decode(self.reparameterize(mu, logvar)), mu, logvar


def loss_function(
    recon_x: torch.Tensor, x: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor
) -> torch.Tensor:
    """Reconstruction + KL divergence, summed over elements and batch (Kingma & Welling, appendix B)."""
    bce = F.binary_cross_entropy(recon_x, x, reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


LossFunction = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def main(argv: list[str] | None = None, loss_function: LossFunction = loss_function) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    train_data, test_data = binary_patterns(4096, DIM, seed=1), binary_patterns(512, DIM, seed=2)
    model = VAE()
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    def test(step: int) -> None:
        model.eval()
        with torch.no_grad():
            recon, mu, logvar = model(test_data)
            test_loss = F.binary_cross_entropy(recon, test_data, reduction="sum") - 0.5 * torch.sum(
                1 + logvar - mu.pow(2) - logvar.exp()
            )
        print(f"eval {step} test_loss={test_loss.item() / len(test_data):.4f}")
        model.train()

    test(0)
    for step in range(1, args.steps + 1):
        data = train_data[torch.randint(0, len(train_data), (args.batch_size,))]
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        optimizer.step()
        print(f"step {step} loss={loss.item() / len(data):.4f}")
    test(args.steps)


if __name__ == "__main__":
    main()

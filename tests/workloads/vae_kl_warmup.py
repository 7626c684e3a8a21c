"""VAE with a KL warm-up on continuous clustered data (Bowman et al. 2016, "Generating Sentences from
a Continuous Space", KL cost annealing; also Sønderby et al. 2016, "Ladder VAE", warm-up).

The KL weight rises linearly from 0 to 1 over the first `--warmup` steps, so the objective itself
changes during warm-up (its KL share grows and can push the loss up, by design). A Gaussian decoder (squared error), Adam 1e-3. The health metric
is the held-out negative ELBO at full KL weight (`test_elbo`, lower is better).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from synthetic import clusters
from torch import nn, optim

DIM, HIDDEN, LATENT = 16, 64, 4


class GaussianVAE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(DIM, HIDDEN), nn.Tanh())
        self.mean = nn.Linear(HIDDEN, LATENT)
        self.log_var = nn.Linear(HIDDEN, LATENT)
        self.decoder = nn.Sequential(nn.Linear(LATENT, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, DIM))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = self.encoder(x)
        mean, log_var = self.mean(h), self.log_var(h)
        z = mean + torch.randn_like(mean) * torch.exp(0.5 * log_var)
        return self.decoder(z), mean, log_var


def terms(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    recon, mean, log_var = model(x)
    rec = 0.5 * F.mse_loss(recon, x, reduction="sum") / x.size(0)
    kl = -0.5 * torch.sum(1 + log_var - mean.pow(2) - log_var.exp()) / x.size(0)
    return rec, kl


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=40, help="steps over which the KL weight goes 0 -> 1")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    train_x, _ = clusters(4096, DIM, classes=6, spread=0.3, seed=1)
    test_x, _ = clusters(512, DIM, classes=6, spread=0.3, seed=2)
    model = GaussianVAE()
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    def test(step: int) -> None:
        with torch.no_grad():
            rec, kl = terms(model, test_x)
        print(f"eval {step} test_elbo={(rec + kl).item():.4f} test_rec={rec.item():.4f}")

    test(0)
    for step in range(1, args.steps + 1):
        kl_weight = min(1.0, step / args.warmup)
        x = train_x[torch.randint(0, len(train_x), (args.batch_size,))]
        optimizer.zero_grad()
        rec, kl = terms(model, x)
        loss = rec + kl_weight * kl
        loss.backward()
        optimizer.step()
        print(
            f"step {step} loss={loss.item():.4f} rec={rec.item():.4f} kl={kl.item():.4f} kl_weight={kl_weight:.3f}"
        )
    test(args.steps)


if __name__ == "__main__":
    main()

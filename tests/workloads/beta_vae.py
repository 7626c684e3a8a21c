"""beta-VAE on synthetic blob images (Higgins et al. 2017, "beta-VAE: Learning Basic Visual Concepts
with a Constrained Variational Framework"; architecture after 1Konny/Beta-VAE, scaled down).

A small convolutional encoder/decoder, a Gaussian decoder (squared error summed per image) and the KL
term weighted by beta = 4, Adam 5e-4. The health metric is the held-out beta-weighted loss per image
(`test_loss`, lower is better).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from synthetic import blob_images
from torch import nn, optim

LATENT = 4


class BetaVAE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 16, 4, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 4, 2, 1), nn.ReLU(), nn.Flatten()
        )
        self.fc_mu = nn.Linear(32 * 4 * 4, LATENT)
        self.fc_logvar = nn.Linear(32 * 4 * 4, LATENT)
        self.fc_dec = nn.Linear(LATENT, 32 * 4 * 4)
        self.decoder = nn.Sequential(
            nn.ReLU(), nn.ConvTranspose2d(32, 16, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(16, 1, 4, 2, 1)
        )

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = self.encoder(x)
        mu, logvar = self.fc_mu(h), self.fc_logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        recon = torch.sigmoid(self.decoder(self.fc_dec(z).view(-1, 32, 4, 4)))
        return recon, mu, logvar


def beta_vae_loss(
    recon: torch.Tensor, x: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor, beta: float
) -> torch.Tensor:
    recon_loss = F.mse_loss(recon, x, reduction="sum") / x.size(0)
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / x.size(0)
    return recon_loss + beta * kld


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--beta", type=float, default=4.0)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    train_data = (blob_images(4096, seed=1) + 1) / 2
    test_data = (blob_images(256, seed=2) + 1) / 2
    model = BetaVAE()
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    def test(step: int) -> None:
        with torch.no_grad():
            recon, mu, logvar = model(test_data)
            loss = beta_vae_loss(recon, test_data, mu, logvar, args.beta)
        print(f"eval {step} test_loss={loss.item():.4f}")

    test(0)
    for step in range(1, args.steps + 1):
        x = train_data[torch.randint(0, len(train_data), (args.batch_size,))]
        optimizer.zero_grad()
        recon, mu, logvar = model(x)
        loss = beta_vae_loss(recon, x, mu, logvar, args.beta)
        loss.backward()
        optimizer.step()
        print(f"step {step} loss={loss.item():.4f}")
    test(args.steps)


if __name__ == "__main__":
    main()

"""A tiny DDPM on the two-moons toy (Ho et al. 2020, "Denoising Diffusion Probabilistic Models";
small-scale setup after tanelp/tiny-diffusion).

An MLP predicts the noise added to 2-D points at a random timestep of a linear beta schedule
(T = 50), with a sinusoidal timestep embedding; plain MSE on the noise, Adam 1e-3. The per-batch loss
is noisy (a random timestep per sample); the health metric is the loss on a fixed held-out set of
(point, timestep, noise) triples (`test_loss`, lower is better).
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
from synthetic import two_moons
from torch import nn, optim

T, EMBED, HIDDEN = 50, 16, 128


def timestep_embedding(t: torch.Tensor, dim: int = EMBED) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(1000.0) * torch.arange(half) / half)
    angles = t.float()[:, None] * freqs[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)


class NoisePredictor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(2 + EMBED, HIDDEN),
            nn.GELU(),
            nn.Linear(HIDDEN, HIDDEN),
            nn.GELU(),
            nn.Linear(HIDDEN, 2),
        )

    def forward(self, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([x_t, timestep_embedding(t)], dim=1))


class Schedule:
    """The forward process q(x_t | x_0) = N(sqrt(abar_t) x_0, (1 - abar_t) I) of a linear beta schedule."""

    def __init__(self) -> None:
        betas = torch.linspace(1e-4, 0.05, T)
        self.alphas_cumprod = torch.cumprod(1 - betas, dim=0)

    def add_noise(self, x0: torch.Tensor, noise: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        abar = self.alphas_cumprod[t][:, None]
        return abar.sqrt() * x0 + (1 - abar).sqrt() * noise


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    dataset = two_moons(8192, seed=1)
    schedule = Schedule()
    model = NoisePredictor()
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)

    g = torch.Generator().manual_seed(2)
    test_x0 = two_moons(1024, seed=2)
    test_t = torch.randint(0, T, (1024,), generator=g)
    test_noise = torch.randn(1024, 2, generator=g)

    def test(step: int) -> None:
        with torch.no_grad():
            pred = model(schedule.add_noise(test_x0, test_noise, test_t), test_t)
        print(f"eval {step} test_loss={F.mse_loss(pred, test_noise).item():.4f}")

    test(0)
    for step in range(1, args.steps + 1):
        x0 = dataset[torch.randint(0, len(dataset), (args.batch_size,))]
        t = torch.randint(0, T, (args.batch_size,))
        noise = torch.randn_like(x0)
        optimizer.zero_grad()
        loss = F.mse_loss(model(schedule.add_noise(x0, noise, t), t), noise)
        loss.backward()
        optimizer.step()
        print(f"step {step} loss={loss.item():.4f}")
    test(args.steps)


if __name__ == "__main__":
    main()

"""WGAN-GP on the 8-Gaussians toy (Gulrajani et al. 2017, "Improved Training of Wasserstein GANs").

An MLP critic and generator; the critic takes `n_critic` steps per generator step with a gradient
penalty on interpolates (computed with `create_graph=True`), Adam(1e-4, betas (0.5, 0.9)) as in the
paper. The critic's loss is a Wasserstein estimate that rises and falls; the health metric is the
sliced Wasserstein distance from generated to real points (`swd`, lower is better).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from synthetic import gaussian_ring, sliced_wasserstein
from torch import autograd, nn, optim

NZ, HIDDEN = 2, 64


def mlp(d_in: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(d_in, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, d_out)
    )


def gradient_penalty(critic: nn.Module, real: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
    alpha = torch.rand(real.size(0), 1)
    interpolates = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    scores = critic(interpolates)
    grads = autograd.grad(scores.sum(), interpolates, create_graph=True)[0]
    return ((grads.norm(2, dim=1) - 1) ** 2).mean()


def critic_step(
    netD: nn.Module, netG: nn.Module, optimizerD: optim.Optimizer, real: torch.Tensor, lambda_gp: float
) -> tuple[float, float]:
    optimizerD.zero_grad()
    with torch.no_grad():
        fake = netG(torch.randn(real.size(0), NZ))
    wasserstein = netD(real).mean() - netD(fake).mean()
    penalty = gradient_penalty(netD, real, fake)
    loss_d = -wasserstein + lambda_gp * penalty
    loss_d.backward()
    optimizerD.step()
    return loss_d.item(), wasserstein.item()


def make_optimizers(netG: nn.Module, netD: nn.Module, lr: float) -> tuple[optim.Optimizer, optim.Optimizer]:
    optimizerD = optim.Adam(netD.parameters(), lr=lr, betas=(0.5, 0.9))
    optimizerG = optim.Adam(netG.parameters(), lr=lr, betas=(0.5, 0.9))
    return optimizerD, optimizerG


OptimizerFactory = Callable[[nn.Module, nn.Module, float], tuple[optim.Optimizer, optim.Optimizer]]


def main(argv: list[str] | None = None, make_optimizers: OptimizerFactory = make_optimizers) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=40, help="generator steps")
    parser.add_argument("--n-critic", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--lambda-gp", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    dataset = gaussian_ring(8192, seed=1)
    held_out = gaussian_ring(1024, seed=2)
    netG, netD = mlp(NZ, 2), mlp(2, 1)
    optimizerD, optimizerG = make_optimizers(netG, netD, args.lr)
    fixed_noise = torch.randn(1024, NZ)

    def evaluate(step: int) -> None:
        with torch.no_grad():
            print(f"eval {step} swd={sliced_wasserstein(netG(fixed_noise), held_out):.4f}")

    evaluate(0)
    for step in range(1, args.steps + 1):
        for _ in range(args.n_critic):
            real = dataset[torch.randint(0, len(dataset), (args.batch_size,))]
            loss_d, wasserstein = critic_step(netD, netG, optimizerD, real, args.lambda_gp)

        optimizerG.zero_grad()
        loss_g = -netD(netG(torch.randn(args.batch_size, NZ))).mean()
        loss_g.backward()
        optimizerG.step()

        print(f"step {step} loss_d={loss_d:.4f} loss_g={loss_g.item():.4f} wasserstein={wasserstein:.4f}")
        if step % 20 == 0:
            evaluate(step)
    if args.steps % 20:
        evaluate(args.steps)


if __name__ == "__main__":
    main()

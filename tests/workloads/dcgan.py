"""DCGAN on synthetic 16x16 blob images (after pytorch/examples dcgan/main.py, scaled down).

Two networks, two Adam optimizers (lr 2e-4, beta1 0.5): D steps on a real batch and a detached fake
batch, then G steps through D with "real" labels. Neither loss is meant to go down; the health metric
is the sliced Wasserstein distance between generated and real images (`swd`, lower is better).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from synthetic import blob_images, sliced_wasserstein
from torch import nn, optim

NZ, NGF, NDF = 16, 16, 16


class Generator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(NZ, NGF * 2, 4, 1, 0, bias=False),  # 4x4
            nn.BatchNorm2d(NGF * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 2, NGF, 4, 2, 1, bias=False),  # 8x8
            nn.BatchNorm2d(NGF),
            nn.ReLU(True),
            nn.ConvTranspose2d(NGF, 1, 4, 2, 1, bias=False),  # 16x16
            nn.Tanh(),
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(1, NDF, 4, 2, 1, bias=False),  # 8x8
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False),  # 4x4
            nn.BatchNorm2d(NDF * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.main(x).view(-1)


def weights_init(m: nn.Module) -> None:
    """The DCGAN paper's initialisation: conv weights N(0, 0.02), batch-norm scale N(1, 0.02)."""
    if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif isinstance(m, nn.BatchNorm2d):
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


def update_discriminator(
    netD: nn.Module, optimizerD: optim.Optimizer, criterion: nn.Module, real: torch.Tensor, fake: torch.Tensor
) -> float:
    """(1) Update D: maximise log(D(x)) + log(1 - D(G(z))), with G's output detached."""
    netD.zero_grad()
    errD_real = criterion(netD(real), torch.ones(real.size(0)))
    errD_real.backward()
    errD_fake = criterion(netD(fake.detach()), torch.zeros(fake.size(0)))
    errD_fake.backward()
    optimizerD.step()
    return (errD_real + errD_fake).item()


DiscriminatorUpdate = Callable[[nn.Module, optim.Optimizer, nn.Module, torch.Tensor, torch.Tensor], float]


def main(
    argv: list[str] | None = None, update_discriminator: DiscriminatorUpdate = update_discriminator
) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    dataset = blob_images(4096, seed=1)
    held_out = blob_images(512, seed=2)
    netG, netD = Generator(), Discriminator()
    netG.apply(weights_init)
    netD.apply(weights_init)
    criterion = nn.BCELoss()
    fixed_noise = torch.randn(512, NZ, 1, 1)
    optimizerD = optim.Adam(netD.parameters(), lr=args.lr, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=args.lr, betas=(0.5, 0.999))

    def evaluate(step: int) -> None:
        with torch.no_grad():
            print(f"eval {step} swd={sliced_wasserstein(netG(fixed_noise), held_out):.4f}")

    evaluate(0)
    for step in range(1, args.steps + 1):
        real = dataset[torch.randint(0, len(dataset), (args.batch_size,))]
        fake = netG(torch.randn(args.batch_size, NZ, 1, 1))
        errD = update_discriminator(netD, optimizerD, criterion, real, fake)

        # (2) Update G: maximise log(D(G(z))), i.e. fake images labelled real
        netG.zero_grad()
        errG = criterion(netD(fake), torch.ones(args.batch_size))
        errG.backward()
        optimizerG.step()

        print(f"step {step} loss_d={errD:.4f} loss_g={errG.item():.4f}")
        if step % 20 == 0:
            evaluate(step)
    if args.steps % 20:
        evaluate(args.steps)


if __name__ == "__main__":
    main()

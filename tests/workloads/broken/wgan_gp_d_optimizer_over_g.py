"""BROKEN twin of wgan_gp.py: the critic's optimizer is built over the generator's parameters.

Bug: a copy-paste slip, `optimizerD = optim.Adam(netG.parameters(), ...)`. The critic's backward
fills netD's gradients, but `optimizerD.step()` moves netG (with whatever gradient G still holds from
its last step) and never netD: the critic stays at its random initialisation and the generator
follows it. The critic's fakes are made under `no_grad`, so nothing crashes.

Module: `netD` (the critic MLP; every parameter gets a gradient and never changes).
Expected finding: `params_not_updated` on `netD`. Also true, and reported by today's probe:
`grad_not_zeroed` on `netD` (`optimizerD.zero_grad()` clears G's gradients, so D's accumulate).
"""

from __future__ import annotations

import os
import sys

from torch import nn, optim

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import wgan_gp


def make_optimizers(netG: nn.Module, netD: nn.Module, lr: float) -> tuple[optim.Optimizer, optim.Optimizer]:
    optimizerD = optim.Adam(netG.parameters(), lr=lr, betas=(0.5, 0.9))  # BUG: should be netD
    optimizerG = optim.Adam(netG.parameters(), lr=lr, betas=(0.5, 0.9))
    return optimizerD, optimizerG


if __name__ == "__main__":
    wgan_gp.main(make_optimizers=make_optimizers)

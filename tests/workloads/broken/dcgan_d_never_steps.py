"""BROKEN twin of dcgan.py: the discriminator's optimizer is never called.

Bug: the discriminator update computes both BCE terms and their gradients but `optimizerD.step()`
is missing (lost when the D update was moved into a helper). netD keeps its initial weights; the
generator learns against a fixed random discriminator. Both losses still print "adversarial"-looking
numbers and nothing crashes.

Module: `netD` (the whole Discriminator; every parameter gets a gradient and never changes).
Expected finding: `params_not_updated` on `netD`.
"""

from __future__ import annotations

import os
import sys

import torch
from torch import nn, optim

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import dcgan


def update_discriminator(
    netD: nn.Module, optimizerD: optim.Optimizer, criterion: nn.Module, real: torch.Tensor, fake: torch.Tensor
) -> float:
    netD.zero_grad()
    errD_real = criterion(netD(real), torch.ones(real.size(0)))
    errD_real.backward()
    errD_fake = criterion(netD(fake.detach()), torch.zeros(fake.size(0)))
    errD_fake.backward()
    # BUG: optimizerD.step() is missing
    return (errD_real + errD_fake).item()


if __name__ == "__main__":
    dcgan.main(update_discriminator=update_discriminator)

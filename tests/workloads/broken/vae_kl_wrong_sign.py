"""BROKEN twin of vae.py: the KL term enters the loss with the wrong sign.

Bug: the KL divergence is written as `0.5 * sum(1 + logvar - mu^2 - exp(logvar))` (the negative of
the KL), so the loss rewards moving q(z|x) AWAY from the prior: the mean head's outputs grow and the
log-variance head is pushed towards extreme values. The total loss keeps going down (it is unbounded
below), so a "loss decreases" check passes.

Module: the encoder's heads `fc21` (mean) and `fc22` (log-variance), which the KL term drives.
Expected finding: none of findings.md fits exactly (the symptoms may later show as
`exploding_gradients` or `nonfinite_loss`); PROPOSED new code `loss_term_wrong_sign` ("a term that is
a divergence (non-negative by construction) is subtracted from the loss, so minimising the loss
maximises it"), on `fc21`/`fc22`.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import vae


def loss_function(
    recon_x: torch.Tensor, x: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor
) -> torch.Tensor:
    bce = F.binary_cross_entropy(recon_x, x, reduction="sum")
    kld = 0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())  # BUG: the sign of the KL is flipped
    return bce + kld


if __name__ == "__main__":
    vae.main(loss_function=loss_function)

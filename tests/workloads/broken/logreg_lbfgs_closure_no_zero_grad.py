"""BROKEN twin of logreg_lbfgs.py: the L-BFGS closure forgets `optimizer.zero_grad()`.

Bug: LBFGS calls the closure many times per `step`; without `zero_grad` each call ADDS its gradient
to the previous ones, so the direction and the line search's curvature checks see a running sum of
stale gradients. The loss still moves (often less, sometimes erratically) and nothing crashes.

Module: the whole model (one `nn.Linear`, the root module).
Expected finding: `grad_not_zeroed` (module: none, the whole model).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn, optim

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import logreg_lbfgs


def make_closure(
    optimizer: optim.Optimizer, model: nn.Linear, x: torch.Tensor, y: torch.Tensor, l2: float
) -> Callable[[], torch.Tensor]:
    def closure() -> torch.Tensor:
        # BUG: optimizer.zero_grad() is missing
        loss = F.binary_cross_entropy_with_logits(model(x).squeeze(1), y) + l2 * model.weight.pow(2).sum()
        loss.backward()
        return loss

    return closure


if __name__ == "__main__":
    logreg_lbfgs.main(make_closure=make_closure)

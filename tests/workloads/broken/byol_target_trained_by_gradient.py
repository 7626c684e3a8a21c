"""BROKEN twin of byol.py: the EMA target network is trained by gradient as well.

Bug: the target copies are made with a plain `copy.deepcopy` (not frozen) and the target branch runs
without `torch.no_grad()` (the stop-gradient is missing). Since the optimizer holds all of the
learner's parameters (as byol-pytorch's README does), the target now gets gradient steps from the
loss on top of its EMA update: BYOL without its stop-gradient, which the paper shows collapses.

Module: `target_encoder` and `target_projector` (the EMA copies; they receive gradients and are
moved by the optimizer).
Expected finding: none of findings.md fits; PROPOSED new code `target_receives_gradient` ("a network
updated as an EMA/copy of another also receives gradient or optimizer updates"), on
`target_encoder`/`target_projector`.
"""

from __future__ import annotations

import copy
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import byol


def target_projection(learner: byol.BYOL, x: torch.Tensor) -> torch.Tensor:
    return learner.target(x)  # BUG: no torch.no_grad() / stop-gradient


if __name__ == "__main__":
    byol.main(make_target=copy.deepcopy, target_projection=target_projection)  # BUG: the copy is not frozen

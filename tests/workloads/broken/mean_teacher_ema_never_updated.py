"""BROKEN twin of mean_teacher.py: the teacher's EMA update never changes the teacher.

Bug: the update is written with out-of-place operations, `ema_param.mul(alpha).add(param, ...)`,
whose result is thrown away (the in-place `mul_`/`add_` were intended). The teacher keeps its random
initial weights for the whole run; the consistency loss then pulls the student towards a random
network. Nothing crashes and the student's supervised loss still falls.

Module: `ema_model` (the teacher; it is never updated by anything).
Expected finding: none of findings.md fits (`params_not_updated` is for parameters that get a
gradient); PROPOSED new code `target_not_updated` ("an EMA/target copy used under no_grad never
changes while the network it should follow trains"), on `ema_model`.
"""

from __future__ import annotations

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import mean_teacher


def update_ema_variables(model: nn.Module, ema_model: nn.Module, alpha: float, global_step: int) -> None:
    alpha = min(1 - 1 / (global_step + 1), alpha)
    with torch.no_grad():
        for ema_param, param in zip(ema_model.parameters(), model.parameters(), strict=True):
            ema_param.mul(alpha).add(param, alpha=1 - alpha)  # BUG: out of place, the result is discarded


if __name__ == "__main__":
    mean_teacher.main(update_ema_variables=update_ema_variables)

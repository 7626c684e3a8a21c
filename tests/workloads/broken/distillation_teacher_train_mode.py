"""BROKEN twin of distillation.py: the frozen teacher is left in training mode.

Bug: the teacher is frozen with `requires_grad_(False)` and run under `no_grad`, but `teacher.eval()`
is missing. Its dropout layers drop units on every distillation batch (the soft targets are noisy
samples instead of the teacher's predictions) and its batch-norm layers normalise with each batch's
statistics and keep overwriting their running statistics.

Module: `teacher` (its `BatchNorm1d` layers `net.2`, `net.6` and `Dropout` layers `net.4`, `net.8`).
Expected finding: none of findings.md fits (`train_mode_off` is the opposite case, `dropout_in_eval`
is about the user's evaluation step); PROPOSED new code `teacher_in_train_mode` ("a frozen module used
only under no_grad as a teacher/target is in training mode: dropout active, batch-norm statistics
updating"), on `teacher`.
"""

from __future__ import annotations

import os
import sys

from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import distillation


def freeze_teacher(teacher: nn.Module) -> None:
    teacher.requires_grad_(False)  # BUG: teacher.eval() is missing


if __name__ == "__main__":
    distillation.main(freeze_teacher=freeze_teacher)

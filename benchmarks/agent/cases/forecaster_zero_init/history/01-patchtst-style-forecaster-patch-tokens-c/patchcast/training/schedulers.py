"""Learning-rate schedules as multipliers of the base learning rate, stepped once per batch."""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from patchcast.config import OptimConfig


def lr_multiplier(step: int, total: int, cfg: OptimConfig) -> float:
    if cfg.warmup_steps and step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    if cfg.schedule == "constant":
        return 1.0
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps))
    if cfg.schedule == "cosine":
        return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
    if cfg.schedule == "linear":
        return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * (1 - progress)
    raise ValueError(f"unknown schedule {cfg.schedule!r} (cosine, linear, constant)")


def build_scheduler(optimizer: Optimizer, total_steps: int, cfg: OptimConfig) -> LambdaLR:
    return LambdaLR(optimizer, lambda step: lr_multiplier(step, total_steps, cfg))

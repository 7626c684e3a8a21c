"""Optimizer and learning-rate schedule (per optimizer step)."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from hartrack.config import TrainConfig


def build_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.dim() < 2 else decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr)


def build_scheduler(optimizer: torch.optim.Optimizer, steps_per_epoch: int, cfg: TrainConfig) -> LambdaLR:
    warmup = cfg.warmup_epochs * steps_per_epoch
    total = max(cfg.epochs * steps_per_epoch, 1)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return 0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * progress))

    return LambdaLR(optimizer, factor)

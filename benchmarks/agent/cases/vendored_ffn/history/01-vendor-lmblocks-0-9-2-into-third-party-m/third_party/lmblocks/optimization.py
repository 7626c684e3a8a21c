# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Optimizer and schedule helpers."""

from __future__ import annotations

import math
from typing import Iterable

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from .normalization import LayerNorm, RMSNorm, ScaleNorm

NO_DECAY_MODULES = (nn.LayerNorm, LayerNorm, RMSNorm, ScaleNorm, nn.Embedding)


def param_groups(model: nn.Module, weight_decay: float, no_decay_embeddings: bool = True) -> list[dict]:
    """Two groups: matrices with weight decay; biases, norms, gains (and embeddings) without.

    Tied parameters are listed once.
    """
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    seen: set[int] = set()
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            if not param.requires_grad or id(param) in seen:
                continue
            seen.add(id(param))
            skip = isinstance(module, NO_DECAY_MODULES) and (no_decay_embeddings or not isinstance(module, nn.Embedding))
            if skip or param.dim() < 2 or name in ("bias", "gamma"):
                no_decay.append(param)
            else:
                decay.append(param)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


def build_optimizer(
    model: nn.Module,
    lr: float,
    weight_decay: float = 0.1,
    betas: Iterable[float] = (0.9, 0.95),
    eps: float = 1e-8,
    fused: bool | None = None,
) -> torch.optim.AdamW:
    kwargs = {"fused": fused} if fused is not None else {}
    return torch.optim.AdamW(param_groups(model, weight_decay), lr=lr, betas=tuple(betas), eps=eps, **kwargs)


def cosine_with_warmup(optimizer: torch.optim.Optimizer, warmup: int, total: int, min_ratio: float = 0.1) -> LambdaLR:
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / max(1, warmup)
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return LambdaLR(optimizer, factor)


def inverse_sqrt(optimizer: torch.optim.Optimizer, warmup: int) -> LambdaLR:
    return LambdaLR(optimizer, lambda s: min((s + 1) / max(1, warmup), math.sqrt(max(1, warmup) / max(1, s + 1))))


def wsd(optimizer: torch.optim.Optimizer, warmup: int, total: int, decay_frac: float = 0.2) -> LambdaLR:
    """Warmup-stable-decay (MiniCPM): constant after warmup, linear decay over the last ``decay_frac``."""
    decay_start = int(total * (1 - decay_frac))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / max(1, warmup)
        if step < decay_start:
            return 1.0
        return max(0.0, 1 - (step - decay_start) / max(1, total - decay_start))

    return LambdaLR(optimizer, factor)

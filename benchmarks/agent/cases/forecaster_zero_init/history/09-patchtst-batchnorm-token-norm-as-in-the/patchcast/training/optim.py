"""Optimizer construction with the usual no-weight-decay groups."""

from __future__ import annotations

import torch
from torch import nn

from patchcast.config import OptimConfig

NO_DECAY_TYPES = (nn.LayerNorm, nn.BatchNorm1d)


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Biases, norms, positional tables and RevIN's affine parameters get no weight decay."""
    decay, no_decay = [], []
    for module_name, module in model.named_modules():
        for name, param in module.named_parameters(recurse=False):
            if not param.requires_grad:
                continue
            full = f"{module_name}.{name}" if module_name else name
            if name == "bias" or isinstance(module, NO_DECAY_TYPES) or "pos" in full or "revin" in full:
                no_decay.append(param)
            else:
                decay.append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def build_optimizer(model: nn.Module, cfg: OptimConfig) -> torch.optim.Optimizer:
    groups = parameter_groups(model, cfg.weight_decay)
    if cfg.name == "adamw":
        return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas)
    if cfg.name == "adam":
        return torch.optim.Adam(groups, lr=cfg.lr, betas=cfg.betas)
    if cfg.name == "sgd":
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=0.9, nesterov=True)
    raise ValueError(f"unknown optimizer {cfg.name!r} (adamw, adam, sgd)")

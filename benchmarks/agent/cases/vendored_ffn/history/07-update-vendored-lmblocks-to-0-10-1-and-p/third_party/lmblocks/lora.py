# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Low-rank adaptation (Hu et al., 2021) of linear layers selected by name.

    inject_lora(model, targets=["q_proj", "v_proj"], rank=8)
    mark_only_lora_trainable(model)
    ...
    merge_lora(model)   # fold the adapters into the base weights for inference
"""

from __future__ import annotations

import math
import re
from typing import Iterable

import torch
import torch.nn.functional as F
from torch import nn


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank: int = 8, alpha: float = 16.0, dropout: float = 0.0) -> None:
        super().__init__()
        if rank < 1:
            raise ValueError("LoRA rank must be >= 1")
        self.base = base
        self.rank = rank
        self.scaling = alpha / rank
        self.lora_a = nn.Parameter(torch.empty(rank, base.in_features))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank))
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))
        self.drop = nn.Dropout(dropout)
        self.merged = False

    @property
    def weight(self) -> torch.Tensor:
        return self.base.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        if not self.merged:
            out = out + F.linear(F.linear(self.drop(x), self.lora_a), self.lora_b) * self.scaling
        return out

    @torch.no_grad()
    def merge(self) -> None:
        if not self.merged:
            self.base.weight += (self.lora_b @ self.lora_a) * self.scaling
            self.merged = True

    @torch.no_grad()
    def unmerge(self) -> None:
        if self.merged:
            self.base.weight -= (self.lora_b @ self.lora_a) * self.scaling
            self.merged = False


def _matches(name: str, targets: Iterable[str]) -> bool:
    """A target matches a module whose last name component equals it, or a regex in ``re:...``."""
    last = name.rsplit(".", 1)[-1]
    for target in targets:
        if target.startswith("re:"):
            if re.fullmatch(target[3:], name):
                return True
        elif last == target:
            return True
    return False


def inject_lora(
    model: nn.Module, targets: Iterable[str], rank: int = 8, alpha: float = 16.0, dropout: float = 0.0
) -> list[str]:
    targets = list(targets)
    replaced: list[str] = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if isinstance(child, nn.Linear) and _matches(full, targets):
                setattr(module, child_name, LoRALinear(child, rank, alpha, dropout))
                replaced.append(full)
    if not replaced:
        raise ValueError(f"no linear layer matches LoRA targets {targets}")
    return replaced


def mark_only_lora_trainable(model: nn.Module, train_bias: bool = False) -> None:
    for name, param in model.named_parameters():
        param.requires_grad = "lora_" in name or (train_bias and name.endswith(".bias"))


def merge_lora(model: nn.Module) -> int:
    count = 0
    for module in model.modules():
        if isinstance(module, LoRALinear):
            module.merge()
            count += 1
    return count


def lora_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v for k, v in model.state_dict().items() if "lora_" in k}

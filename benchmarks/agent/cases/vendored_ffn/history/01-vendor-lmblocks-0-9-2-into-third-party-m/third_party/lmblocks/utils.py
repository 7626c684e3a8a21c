# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Small utilities: parameter counts, freezing by name, summaries, seeding."""

from __future__ import annotations

import fnmatch
import random
from collections import OrderedDict
from typing import Iterable

import torch
from torch import nn


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    seen: set[int] = set()
    total = 0
    for p in model.parameters():
        if id(p) in seen or (trainable_only and not p.requires_grad):
            continue
        seen.add(id(p))
        total += p.numel()
    return total


def freeze(model: nn.Module, patterns: Iterable[str]) -> list[str]:
    """Set ``requires_grad=False`` on parameters whose name matches a glob pattern
    (``"blocks.0.*"``, ``"*.norm_*"``). Returns the names frozen."""
    patterns = list(patterns)
    frozen = []
    for name, param in model.named_parameters():
        if any(fnmatch.fnmatchcase(name, p) for p in patterns):
            param.requires_grad = False
            frozen.append(name)
    return frozen


def unfreeze(model: nn.Module, patterns: Iterable[str] = ("*",)) -> list[str]:
    patterns = list(patterns)
    thawed = []
    for name, param in model.named_parameters():
        if any(fnmatch.fnmatchcase(name, p) for p in patterns):
            param.requires_grad = True
            thawed.append(name)
    return thawed


def parameter_summary(model: nn.Module, depth: int = 2) -> str:
    """Parameter counts grouped by the first ``depth`` name components, as a text table."""
    groups: "OrderedDict[str, list[int]]" = OrderedDict()
    seen: set[int] = set()
    for name, p in model.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        key = ".".join(name.split(".")[:depth])
        entry = groups.setdefault(key, [0, 0])
        entry[0] += p.numel()
        entry[1] += p.numel() if p.requires_grad else 0
    width = max((len(k) for k in groups), default=10)
    lines = [f"{'module':<{width}}  {'params':>12}  {'trainable':>12}"]
    for key, (n, t) in groups.items():
        lines.append(f"{key:<{width}}  {n:>12,}  {t:>12,}")
    lines.append(f"{'total':<{width}}  {sum(v[0] for v in groups.values()):>12,}  {sum(v[1] for v in groups.values()):>12,}")
    return "\n".join(lines)


def set_seed(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def get_device(prefer: str | None = None) -> torch.device:
    if prefer:
        return torch.device(prefer)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")

# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Forward hooks that collect activation statistics, for debugging training.

    with ActivationStats(model, include=("ffn", "attn")) as stats:
        model(input_ids)
    print(stats.table())
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch
from torch import nn


@dataclass
class Stat:
    calls: int = 0
    mean: float = 0.0
    std: float = 0.0
    absmax: float = 0.0
    zero_frac: float = 0.0


class ActivationStats:
    def __init__(self, model: nn.Module, include: Iterable[str] = ("",), leaf_only: bool = True) -> None:
        self.model = model
        self.include = tuple(include)
        self.leaf_only = leaf_only
        self.stats: dict[str, Stat] = {}
        self._handles: list[torch.utils.hooks.RemovableHandle] = []

    def _hook(self, name: str):
        def record(module: nn.Module, inputs, output) -> None:
            if not isinstance(output, torch.Tensor):
                return
            out = output.detach().float()
            s = self.stats.setdefault(name, Stat())
            n = s.calls
            s.mean = (s.mean * n + out.mean().item()) / (n + 1)
            s.std = (s.std * n + out.std().item()) / (n + 1) if out.numel() > 1 else s.std
            s.absmax = max(s.absmax, out.abs().max().item())
            s.zero_frac = (s.zero_frac * n + (out == 0).float().mean().item()) / (n + 1)
            s.calls += 1

        return record

    def __enter__(self) -> "ActivationStats":
        for name, module in self.model.named_modules():
            if self.leaf_only and any(True for _ in module.children()):
                continue
            if any(part in name for part in self.include):
                self._handles.append(module.register_forward_hook(self._hook(name)))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def table(self) -> str:
        width = max((len(k) for k in self.stats), default=6)
        lines = [f"{'module':<{width}}  {'calls':>5}  {'mean':>9}  {'std':>9}  {'absmax':>9}  {'zeros':>6}"]
        for name, s in self.stats.items():
            lines.append(f"{name:<{width}}  {s.calls:>5}  {s.mean:>9.4f}  {s.std:>9.4f}  {s.absmax:>9.4f}  {s.zero_frac:>6.1%}")
        return "\n".join(lines)


def gradient_norms(model: nn.Module) -> dict[str, float]:
    """Norm of each parameter's ``.grad`` after a backward (missing gradients are left out)."""
    return {name: p.grad.norm().item() for name, p in model.named_parameters() if p.grad is not None}

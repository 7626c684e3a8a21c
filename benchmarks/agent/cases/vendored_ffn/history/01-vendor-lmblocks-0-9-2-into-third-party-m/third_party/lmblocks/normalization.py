# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Normalisation layers: LayerNorm with optional bias, RMSNorm, ScaleNorm."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class LayerNorm(nn.Module):
    """LayerNorm with an optional bias (PyTorch's only gained ``bias=False`` in 2.1)."""

    def __init__(self, dim: int, eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)


class RMSNorm(nn.Module):
    """Root-mean-square norm (Zhang & Sennrich, 2019); computed in float32 for stability."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x * self.weight.float()).to(dtype)


class ScaleNorm(nn.Module):
    """l2-normalise and multiply by one learned scalar (Nguyen & Salazar, 2019)."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.scale = nn.Parameter(torch.tensor(dim**0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x / x.norm(dim=-1, keepdim=True).clamp_min(self.eps)


def build_norm(kind: str, dim: int, eps: float = 1e-5, bias: bool = True) -> nn.Module:
    if kind == "layernorm":
        return LayerNorm(dim, eps, bias)
    if kind == "rmsnorm":
        return RMSNorm(dim, eps)
    if kind == "scalenorm":
        return ScaleNorm(dim, eps)
    raise ValueError(f"unknown norm {kind!r}")

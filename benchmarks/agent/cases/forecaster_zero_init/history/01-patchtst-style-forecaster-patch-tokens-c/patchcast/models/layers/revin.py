"""Reversible instance normalisation (Kim et al., 2022): normalise each input window by its own
statistics and undo it on the forecast, which removes level shifts between windows."""

from __future__ import annotations

import torch
from torch import nn


class RevIN(nn.Module):
    def __init__(self, n_channels: int = 1, eps: float = 1e-5, affine: bool = True) -> None:
        super().__init__()
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = nn.Parameter(torch.ones(n_channels))
            self.bias = nn.Parameter(torch.zeros(n_channels))
        self._mean: torch.Tensor | None = None
        self._std: torch.Tensor | None = None

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """``x: (B, L, C)``; remembers the statistics for ``denormalize``."""
        self._mean = x.mean(1, keepdim=True).detach()
        self._std = torch.sqrt(x.var(1, keepdim=True, unbiased=False) + self.eps).detach()
        x = (x - self._mean) / self._std
        if self.affine:
            x = x * self.weight + self.bias
        return x

    def denormalize(self, y: torch.Tensor) -> torch.Tensor:
        if self._mean is None or self._std is None:
            raise RuntimeError("RevIN.denormalize called before normalize")
        if self.affine:
            y = (y - self.bias) / (self.weight + self.eps * self.eps)
        return y * self._std + self._mean

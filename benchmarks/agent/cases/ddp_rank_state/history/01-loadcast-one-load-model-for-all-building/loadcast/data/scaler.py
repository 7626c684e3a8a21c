"""Standardisation of features and target, fitted on the training data and saved with the model.

The statistics are buffers of an ``nn.Module`` so that they travel in the model's state_dict and
every checkpoint can be used on its own.
"""

from __future__ import annotations

from typing import Iterable

import torch
from torch import nn


class FeatureScaler(nn.Module):
    def __init__(self, n_features: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.register_buffer("x_mean", torch.zeros(n_features))
        self.register_buffer("x_std", torch.ones(n_features))
        self.register_buffer("y_mean", torch.zeros(()))
        self.register_buffer("y_std", torch.ones(()))
        self.register_buffer("fitted", torch.zeros((), dtype=torch.bool))

    @torch.no_grad()
    def fit(self, batches: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> "FeatureScaler":
        """One streaming pass (Chan et al. parallel variance) over ``(x, y)`` batches."""
        n = 0
        x_mean = torch.zeros_like(self.x_mean, dtype=torch.float64)
        x_m2 = torch.zeros_like(x_mean)
        y_mean = torch.zeros((), dtype=torch.float64)
        y_m2 = torch.zeros((), dtype=torch.float64)
        for x, y in batches:
            x, y = x.double(), y.double()
            b = x.shape[0]
            bx_mean, by_mean = x.mean(0), y.mean()
            delta_x, delta_y = bx_mean - x_mean, by_mean - y_mean
            total = n + b
            x_mean += delta_x * b / total
            y_mean += delta_y * b / total
            x_m2 += ((x - bx_mean) ** 2).sum(0) + delta_x**2 * n * b / total
            y_m2 += ((y - by_mean) ** 2).sum() + delta_y**2 * n * b / total
            n = total
        if n < 2:
            raise ValueError("FeatureScaler.fit needs at least two samples")
        self.x_mean.copy_(x_mean)
        self.x_std.copy_((x_m2 / (n - 1)).sqrt().clamp_min(self.eps))
        self.y_mean.copy_(y_mean)
        self.y_std.copy_((y_m2 / (n - 1)).sqrt().clamp_min(self.eps))
        self.fitted.fill_(True)
        return self

    def _check(self) -> None:
        if not bool(self.fitted):
            raise RuntimeError("FeatureScaler used before fit()")

    def transform_x(self, x: torch.Tensor) -> torch.Tensor:
        self._check()
        return (x - self.x_mean) / self.x_std

    def transform_y(self, y: torch.Tensor) -> torch.Tensor:
        self._check()
        return (y - self.y_mean) / self.y_std

    def inverse_y(self, y: torch.Tensor) -> torch.Tensor:
        self._check()
        return y * self.y_std + self.y_mean

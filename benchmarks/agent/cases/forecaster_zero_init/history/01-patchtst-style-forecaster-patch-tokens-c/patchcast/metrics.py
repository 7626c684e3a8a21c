"""Forecast error metrics. All take ``pred`` and ``target`` of the same shape ``(B, H, C)``."""

from __future__ import annotations

import torch


def _check(pred: torch.Tensor, target: torch.Tensor) -> None:
    if pred.shape != target.shape:
        raise ValueError(f"pred {tuple(pred.shape)} and target {tuple(target.shape)} differ")


def mse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    _check(pred, target)
    return (pred - target).pow(2).mean()


def mae(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    _check(pred, target)
    return (pred - target).abs().mean()


def rmse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return mse(pred, target).sqrt()


class MetricAccumulator:
    """Sample-weighted running means of several metrics over an evaluation loop."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.count = 0

    def update(self, pred: torch.Tensor, target: torch.Tensor) -> None:
        n = pred.shape[0]
        values = {"mse": mse(pred, target), "mae": mae(pred, target)}
        for key, value in values.items():
            self.sums[key] = self.sums.get(key, 0.0) + float(value) * n
        self.count += n

    def compute(self) -> dict[str, float]:
        if self.count == 0:
            raise RuntimeError("no batches were evaluated")
        return {key: total / self.count for key, total in self.sums.items()}

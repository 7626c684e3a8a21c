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


def smape(pred: torch.Tensor, target: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Symmetric MAPE in percent (0..200)."""
    _check(pred, target)
    return 200.0 * ((pred - target).abs() / (pred.abs() + target.abs() + eps)).mean()


def mase(pred: torch.Tensor, target: torch.Tensor, history: torch.Tensor, period: int = 1) -> torch.Tensor:
    """MAE scaled by the in-sample MAE of the (seasonal) naive forecast on ``history`` ``(B, L, C)``."""
    _check(pred, target)
    if history.shape[1] <= period:
        raise ValueError(f"history of length {history.shape[1]} is too short for period {period}")
    scale = (history[:, period:] - history[:, :-period]).abs().mean(1, keepdim=True)
    return ((pred - target).abs() / scale.clamp_min(1e-8)).mean()


def per_horizon_mse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """MSE at each forecast step ``(H,)``: errors should grow with the horizon."""
    _check(pred, target)
    return (pred - target).pow(2).mean(dim=(0, 2))


class MetricAccumulator:
    """Sample-weighted running means of several metrics over an evaluation loop."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.count = 0

    def update(self, pred: torch.Tensor, target: torch.Tensor, history: torch.Tensor | None = None) -> None:
        n = pred.shape[0]
        values = {"mse": mse(pred, target), "mae": mae(pred, target)}
        if history is not None:
            values["mase"] = mase(pred, target, history)
        for key, value in values.items():
            self.sums[key] = self.sums.get(key, 0.0) + float(value) * n
        self.count += n

    def compute(self) -> dict[str, float]:
        if self.count == 0:
            raise RuntimeError("no batches were evaluated")
        return {key: total / self.count for key, total in self.sums.items()}

"""Regression metrics in kWh."""

from __future__ import annotations

import torch


@torch.no_grad()
def regression_metrics(pred: torch.Tensor, target: torch.Tensor) -> dict[str, float]:
    err = pred - target
    return {
        "mae": err.abs().mean().item(),
        "rmse": err.pow(2).mean().sqrt().item(),
        # error relative to the mean load: comparable across data sets
        "nmae": (err.abs().mean() / target.abs().mean().clamp_min(1e-9)).item(),
    }


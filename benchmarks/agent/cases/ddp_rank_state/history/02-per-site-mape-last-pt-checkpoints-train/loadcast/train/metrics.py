"""Regression metrics in kWh, overall and per site."""

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


@torch.no_grad()
def per_site_mape(pred: torch.Tensor, target: torch.Tensor, site: torch.Tensor) -> dict[int, float]:
    out = {}
    for s in torch.unique(site).tolist():
        m = site == s
        out[int(s)] = ((pred[m] - target[m]).abs() / target[m].abs().clamp_min(1e-6)).mean().item() * 100
    return out

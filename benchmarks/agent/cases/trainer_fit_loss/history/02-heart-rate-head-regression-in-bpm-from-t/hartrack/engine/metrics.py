"""Evaluation metrics accumulated over batches."""

from __future__ import annotations

import torch


class MetricTracker:
    def __init__(self, n_classes: int) -> None:
        self.n_classes = n_classes
        self.confusion = torch.zeros(n_classes, n_classes, dtype=torch.long)
        self.abs_err = 0.0
        self.sq_err = 0.0
        self.count = 0

    def update(self, outputs: dict[str, torch.Tensor], batch: dict[str, torch.Tensor]) -> None:
        if "logits" in outputs:
            pred = outputs["logits"].argmax(-1)
            idx = batch["activity"] * self.n_classes + pred
            self.confusion += torch.bincount(idx, minlength=self.n_classes**2).view(self.n_classes, self.n_classes)
        if "hr" in outputs:
            err = outputs["hr"].float() - batch["hr"].float()
            self.abs_err += err.abs().sum().item()
            self.sq_err += err.pow(2).sum().item()
        self.count += len(batch["x"])

    def compute(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.confusion.sum() > 0:
            tp = self.confusion.diag().float()
            precision = tp / self.confusion.sum(0).clamp_min(1)
            recall = tp / self.confusion.sum(1).clamp_min(1)
            f1 = 2 * precision * recall / (precision + recall).clamp_min(1e-9)
            out["acc"] = (tp.sum() / self.confusion.sum()).item()
            out["f1"] = f1.mean().item()
        if self.abs_err or self.sq_err:
            out["hr_mae"] = self.abs_err / self.count
            out["hr_rmse"] = (self.sq_err / self.count) ** 0.5
        return out


def score(metrics: dict[str, float], hr_scale: float = 20.0) -> float:
    """One number to select checkpoints on: macro-F1 minus the HR error in units of ``hr_scale`` bpm."""
    value = metrics.get("f1", 0.0)
    if "hr_mae" in metrics:
        value -= metrics["hr_mae"] / hr_scale
    return value

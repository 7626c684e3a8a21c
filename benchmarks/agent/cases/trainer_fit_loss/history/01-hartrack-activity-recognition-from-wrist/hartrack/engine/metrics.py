"""Evaluation metrics accumulated over batches."""

from __future__ import annotations

import torch


class MetricTracker:
    def __init__(self, n_classes: int) -> None:
        self.n_classes = n_classes
        self.confusion = torch.zeros(n_classes, n_classes, dtype=torch.long)
        self.count = 0

    def update(self, outputs: dict[str, torch.Tensor], batch: dict[str, torch.Tensor]) -> None:
        if "logits" in outputs:
            pred = outputs["logits"].argmax(-1)
            idx = batch["activity"] * self.n_classes + pred
            self.confusion += torch.bincount(idx, minlength=self.n_classes**2).view(self.n_classes, self.n_classes)
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
        return out


def score(metrics: dict[str, float]) -> float:
    """The number to select checkpoints on: macro-F1."""
    return metrics.get("f1", 0.0)

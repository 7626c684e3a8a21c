"""Loss terms of the multi-task model. Each term is returned unweighted; the trainer applies
``loss.weights`` after the callbacks have seen the raw terms."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from hartrack.config import LossConfig


class LossComputer:
    def __init__(self, cfg: LossConfig, tasks: tuple[str, ...]) -> None:
        if cfg.hr_loss not in ("mse", "huber", "l1"):
            raise ValueError(f"unknown hr_loss {cfg.hr_loss!r} (mse, huber, l1)")
        missing = [t for t in tasks if t not in cfg.weights]
        if missing:
            raise ValueError(f"no loss weight for task(s) {missing}")
        self.cfg = cfg
        self.tasks = tasks
        self.weights = dict(cfg.weights)

    def terms(self, outputs: dict[str, torch.Tensor], batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        terms: dict[str, torch.Tensor] = {}
        if "activity" in self.tasks:
            terms["activity"] = F.cross_entropy(
                outputs["logits"].float(), batch["activity"], label_smoothing=self.cfg.label_smoothing
            )
        if "hr" in self.tasks:
            pred, target = outputs["hr"].float(), batch["hr"].float()
            if self.cfg.hr_loss == "mse":
                terms["hr"] = F.mse_loss(pred, target)
            elif self.cfg.hr_loss == "huber":
                terms["hr"] = F.huber_loss(pred, target, delta=self.cfg.huber_delta)
            else:
                terms["hr"] = F.l1_loss(pred, target)
        return terms

    def total(self, terms: dict[str, torch.Tensor]) -> torch.Tensor:
        return sum(self.weights[k] * v for k, v in terms.items())  # type: ignore[return-value]

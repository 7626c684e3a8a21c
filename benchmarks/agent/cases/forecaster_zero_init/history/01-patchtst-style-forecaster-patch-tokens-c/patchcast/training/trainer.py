"""The training loop: one epoch of updates, a validation pass, early stopping, a final test."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

from patchcast.config import ExperimentConfig
from patchcast.metrics import MetricAccumulator
from patchcast.training.optim import build_optimizer
from patchcast.training.schedulers import build_scheduler
from patchcast.utils.logging import RunLogger

LOSSES = {"mse": F.mse_loss, "mae": F.l1_loss, "huber": F.smooth_l1_loss}


@dataclass
class FitResult:
    best_epoch: int
    best_val: float
    test: dict[str, float]
    history: list[dict[str, float]] = field(default_factory=list)


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader) -> dict[str, float]:
    model.eval()
    acc = MetricAccumulator()
    for x, y in loader:
        acc.update(model(x), y)
    return acc.compute()


class Trainer:
    def __init__(self, cfg: ExperimentConfig, model: nn.Module, logger: RunLogger) -> None:
        self.cfg = cfg
        self.model = model
        self.log = logger
        if cfg.train.loss not in LOSSES:
            raise ValueError(f"unknown loss {cfg.train.loss!r}; one of {sorted(LOSSES)}")
        self.loss_fn = LOSSES[cfg.train.loss]
        self.trainable = any(p.requires_grad for p in model.parameters())

    def fit(self, train: DataLoader, val: DataLoader, test: DataLoader) -> FitResult:
        cfg = self.cfg
        history: list[dict[str, float]] = []
        if not self.trainable:  # naive baselines: nothing to fit
            val_metrics = evaluate(self.model, val)
            test_metrics = evaluate(self.model, test)
            self.log.info(f"no trainable parameters; val mse {val_metrics['mse']:.4f}")
            return FitResult(0, val_metrics["mse"], test_metrics, history)

        steps_per_epoch = len(train)
        total = cfg.train.max_steps or cfg.train.epochs * steps_per_epoch
        optimizer = build_optimizer(self.model, cfg.optim)
        scheduler = build_scheduler(optimizer, total, cfg.optim)
        step = 0
        best_val, best_epoch = float("inf"), 0
        for epoch in range(1, cfg.train.epochs + 1):
            self.model.train()
            running, seen = 0.0, 0
            for x, y in train:
                loss = self.loss_fn(self.model(x), y)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.optim.grad_clip:
                    nn.utils.clip_grad_norm_(self.model.parameters(), cfg.optim.grad_clip)
                optimizer.step()
                scheduler.step()
                step += 1
                running += loss.item() * x.shape[0]
                seen += x.shape[0]
                if step >= total:
                    break
            val_metrics = evaluate(self.model, val)
            record = {"epoch": epoch, "train_loss": running / max(seen, 1), **{f"val_{k}": v for k, v in val_metrics.items()}}
            history.append(record)
            self.log.info(
                f"epoch {epoch:3d}  train_loss {record['train_loss']:.4f}  val_mse {val_metrics['mse']:.4f}  "
                f"val_mae {val_metrics['mae']:.4f}  lr {scheduler.get_last_lr()[0]:.2e}"
            )
            if val_metrics["mse"] < best_val:
                best_val, best_epoch = val_metrics["mse"], epoch
            if step >= total:
                break
        test_metrics = evaluate(self.model, test)
        return FitResult(best_epoch, best_val, test_metrics, history)

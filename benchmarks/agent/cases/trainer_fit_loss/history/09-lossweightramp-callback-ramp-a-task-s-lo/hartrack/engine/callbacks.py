"""Callbacks: small objects the trainer calls at fixed points of a fit.

Hooks (all optional; the trainer calls whichever a callback defines):

- ``on_fit_start(trainer)`` / ``on_fit_end(trainer)``
- ``on_train_epoch_start(trainer)`` / ``on_train_epoch_end(trainer)``
- ``on_loss_terms(trainer, terms) -> terms``: sees the unweighted loss terms of a batch and may
  return changed ones (rescaling, guarding) before they are weighted and summed
- ``on_before_backward(trainer, loss)``
- ``on_after_optimizer_step(trainer)``
- ``on_validation_start(trainer)`` / ``on_validation_end(trainer, metrics)``
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from hartrack.engine.trainer import Trainer


class Callback:
    """Base class; subclasses define the hooks they need."""


class CallbackList:
    def __init__(self, callbacks: list[Callback]) -> None:
        self.callbacks = callbacks

    def call(self, hook: str, *args: Any) -> None:
        for cb in self.callbacks:
            fn = getattr(cb, hook, None)
            if fn is not None:
                fn(*args)

    def transform(self, hook: str, trainer: "Trainer", value: Any) -> Any:
        for cb in self.callbacks:
            fn = getattr(cb, hook, None)
            if fn is not None:
                value = fn(trainer, value)
        return value

    def __iter__(self):
        return iter(self.callbacks)


class ProgressPrinter(Callback):
    def __init__(self, every: int = 1) -> None:
        self.every = every

    def on_train_epoch_end(self, trainer: "Trainer") -> None:
        s = trainer.state
        if self.every and (s.epoch + 1) % self.every == 0:
            terms = "  ".join(f"{k} {v:.4f}" for k, v in s.epoch_terms.items())
            val = "  ".join(f"val_{k} {v:.4f}" for k, v in s.val_metrics.items())
            lr = trainer.optimizer.param_groups[0]["lr"]
            trainer.log(f"epoch {s.epoch + 1:3d}  {terms}  {val}  lr {lr:.2e}")


class EarlyStopping(Callback):
    def __init__(self, patience: int) -> None:
        self.patience = patience
        self.bad = 0

    def on_validation_end(self, trainer: "Trainer", metrics: dict[str, float]) -> None:
        if trainer.state.best_epoch == trainer.state.epoch:
            self.bad = 0
            return
        self.bad += 1
        if self.patience and self.bad >= self.patience:
            trainer.log(f"early stopping: no improvement for {self.patience} epochs")
            trainer.state.should_stop = True


class BestWeights(Callback):
    """Keep the weights of the best validation score in memory (and on disk with ``out_dir``);
    load them back at the end of the fit."""

    def __init__(self, out_dir: str | None = None) -> None:
        self.out_dir = Path(out_dir) if out_dir else None
        self.best_state: dict[str, torch.Tensor] | None = None

    def on_validation_end(self, trainer: "Trainer", metrics: dict[str, float]) -> None:
        if trainer.state.best_epoch == trainer.state.epoch:
            self.best_state = copy.deepcopy(trainer.model.state_dict())
            if self.out_dir is not None:
                self.out_dir.mkdir(parents=True, exist_ok=True)
                torch.save({"model": self.best_state, "epoch": trainer.state.epoch}, self.out_dir / "best.pt")

    def on_fit_end(self, trainer: "Trainer") -> None:
        if self.best_state is not None:
            trainer.model.load_state_dict(self.best_state)


class EMA(Callback):
    """Exponential moving average of the weights, used for validation and kept at the end."""

    def __init__(self, decay: float) -> None:
        self.decay = decay
        self.shadow: dict[str, torch.Tensor] = {}
        self.backup: dict[str, torch.Tensor] = {}

    def on_fit_start(self, trainer: "Trainer") -> None:
        self.shadow = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}

    @torch.no_grad()
    def on_after_optimizer_step(self, trainer: "Trainer") -> None:
        for k, v in trainer.model.state_dict().items():
            if v.dtype.is_floating_point:
                self.shadow[k].mul_(self.decay).add_(v.detach(), alpha=1 - self.decay)
            else:
                self.shadow[k].copy_(v)

    def on_validation_start(self, trainer: "Trainer") -> None:
        self.backup = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
        trainer.model.load_state_dict(self.shadow)

    def on_validation_end(self, trainer: "Trainer", metrics: dict[str, float]) -> None:
        trainer.model.load_state_dict(self.backup)

    def on_fit_end(self, trainer: "Trainer") -> None:
        trainer.model.load_state_dict(self.shadow)


class NonFiniteGuard(Callback):
    """Drop the update of a batch whose loss is NaN/inf instead of poisoning the weights."""

    def __init__(self) -> None:
        self.skipped = 0

    def on_before_backward(self, trainer: "Trainer", loss: torch.Tensor) -> None:
        if not torch.isfinite(loss).all():
            trainer.state.skip_step = True
            self.skipped += 1

    def on_fit_end(self, trainer: "Trainer") -> None:
        if self.skipped:
            trainer.log(f"NonFiniteGuard: skipped {self.skipped} batch(es) with a non-finite loss")


class SpikeGuard(Callback):
    """Bound each loss term at ``max_loss`` so that a corrupt window (sensor glitch, wrong label)
    cannot produce a huge update."""

    def __init__(self, max_loss: float) -> None:
        self.max_loss = max_loss
        self.clipped = 0

    def on_loss_terms(self, trainer: "Trainer", terms: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        guarded = {}
        for name, value in terms.items():
            if value.item() > self.max_loss:
                self.clipped += 1
            guarded[name] = value.clamp(max=self.max_loss)
        return guarded


class LossWeightRamp(Callback):
    """Ramp the weight of one task's term from 0 to its configured value over the first epochs."""

    def __init__(self, task: str, epochs: int) -> None:
        self.task = task
        self.epochs = epochs
        self.target: float | None = None

    def on_train_epoch_start(self, trainer: "Trainer") -> None:
        if self.target is None:
            self.target = trainer.loss.weights[self.task]
        ramp = min(1.0, (trainer.state.epoch + 1) / max(self.epochs, 1))
        trainer.loss.weights[self.task] = self.target * ramp


def build_callbacks(cfg) -> list[Callback]:
    t = cfg.train
    callbacks: list[Callback] = [ProgressPrinter(), NonFiniteGuard()]
    if getattr(t, "max_loss", None):
        callbacks.append(SpikeGuard(t.max_loss))
    if t.ema_decay:
        callbacks.append(EMA(t.ema_decay))
    callbacks.append(BestWeights(t.out_dir))
    callbacks.append(EarlyStopping(t.patience))
    return callbacks


def is_finite_number(value: float) -> bool:
    return not (math.isnan(value) or math.isinf(value))

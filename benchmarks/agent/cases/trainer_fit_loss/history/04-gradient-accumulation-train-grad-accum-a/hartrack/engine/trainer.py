"""``Trainer(cfg).fit()``: builds data, model, optimizer and callbacks from a config and runs the
epochs. The loss is computed here, per batch, from the model's outputs (see ``LossComputer``)."""

from __future__ import annotations

import contextlib
import time
from typing import Callable

import torch
from torch import nn

from hartrack.config import Config
from hartrack.data import build_loaders
from hartrack.engine.callbacks import CallbackList, build_callbacks
from hartrack.engine.losses import LossComputer
from hartrack.engine.metrics import MetricTracker, score
from hartrack.engine.optim import build_optimizer, build_scheduler
from hartrack.engine.state import TrainerState
from hartrack.models import build_model
from hartrack.utils.seed import seed_everything


class Trainer:
    def __init__(self, cfg: Config, log: Callable[[str], None] = print) -> None:
        self.cfg = cfg
        self.log = log
        seed_everything(cfg.train.seed)
        self.data = build_loaders(cfg)
        self.model: nn.Module = build_model(cfg, self.data.n_classes, self.data.hr_mean)
        self.loss = LossComputer(cfg.loss, tuple(cfg.model.tasks))
        self.optimizer = build_optimizer(self.model, cfg.train)
        steps_per_epoch = max(1, len(self.data.train) // cfg.train.grad_accum)
        self.scheduler = build_scheduler(self.optimizer, steps_per_epoch, cfg.train)
        self.callbacks = CallbackList(build_callbacks(cfg))
        self.state = TrainerState()

    # ------------------------------------------------------------------ public
    def fit(self) -> dict[str, float]:
        cfg = self.cfg.train
        start = time.time()
        self.callbacks.call("on_fit_start", self)
        for epoch in range(cfg.epochs):
            self.state.epoch = epoch
            self.callbacks.call("on_train_epoch_start", self)
            self.state.epoch_terms = self._train_epoch()
            self.state.val_metrics = self.validate()
            self.callbacks.call("on_train_epoch_end", self)
            self.state.history.append({"epoch": epoch + 1, **self.state.epoch_terms, **self.state.val_metrics})
            if self.state.should_stop:
                break
        self.callbacks.call("on_fit_end", self)
        test = self.evaluate(self.data.test)
        self.log(f"fit done in {time.time() - start:.0f}s, best epoch {self.state.best_epoch + 1}")
        return test

    @torch.no_grad()
    def evaluate(self, loader) -> dict[str, float]:
        self.model.eval()
        tracker = MetricTracker(self.data.n_classes)
        for batch in loader:
            tracker.update(self.model(batch["x"]), batch)
        return tracker.compute()

    def validate(self) -> dict[str, float]:
        self.callbacks.call("on_validation_start", self)
        metrics = self.evaluate(self.data.val)
        metrics["score"] = score(metrics)
        if metrics["score"] > self.state.best_score:
            self.state.best_score = metrics["score"]
            self.state.best_epoch = self.state.epoch
        self.callbacks.call("on_validation_end", self, metrics)
        return metrics

    # ------------------------------------------------------------------ internals
    def _autocast(self):
        if self.cfg.train.amp:
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _train_epoch(self) -> dict[str, float]:
        cfg = self.cfg.train
        self.model.train()
        sums: dict[str, float] = {}
        batches = 0
        self.optimizer.zero_grad(set_to_none=True)
        for i, batch in enumerate(self.data.train):
            self.state.batch = i
            with self._autocast():
                outputs = self.model(batch["x"])
            terms = self.loss.terms(outputs, batch)
            for name, value in terms.items():
                sums[name] = sums.get(name, 0.0) + value.item()
            loss = self.loss.total(terms)
            (loss / cfg.grad_accum).backward()
            batches += 1
            if (i + 1) % cfg.grad_accum == 0:
                self._optimizer_step()
        return {name: total / max(batches, 1) for name, total in sums.items()}

    def _optimizer_step(self) -> None:
        if self.cfg.train.grad_clip:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.train.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.state.step += 1
        self.callbacks.call("on_after_optimizer_step", self)

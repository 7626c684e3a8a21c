"""Live-mode gradient probe: attach to a model inside your own training loop.

    import trainsleuth.probe
    handle = trainsleuth.probe.attach(model, optimizer, every=16, run_dir="runs/probe")
    for batch in loader:
        loss = ...; loss.backward(); optimizer.step(); optimizer.zero_grad()
        handle.record_loss(loss)          # optional when the model's output has no .loss
    handle.close()

Every `every`-th step is observed in full (gradient norms, parameter norms, update ratios,
activation statistics, NaN/Inf origins, stale gradients); compact per-step statistics are
appended to `run_dir/steps.jsonl` and the current findings to `run_dir/findings.json`, which the
`read_probe_run` tool and `trainsleuth probe --read RUN_DIR` read. Attaching never changes training:
hooks only observe (no random numbers, no in-place changes, detached statistics), so on CPU the
parameters after N steps are bitwise identical with and without the probe.

Steps are counted by the optimizer's step (when an optimizer is given), else by the model's
forward calls with gradients enabled. Forward passes under `torch.no_grad()` (evaluation) are
never recorded.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import torch

from trainsleuth.tools.runners import _ts_probe_core as core
from trainsleuth.tools.runners import _ts_probe_rules as rules

STEPS_FILE = "steps.jsonl"
FINDINGS_FILE = "findings.json"
META_FILE = "meta.json"
FINDINGS_EVERY_S = 10.0


class ProbeHandle:
    """What `attach` returns: `record_loss`, `flush`, `close` (also usable as a context manager)."""

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer | None,
        every: int,
        run_dir: str | os.PathLike[str],
        *,
        detail: bool = False,
        history: int = 64,
        updates_every: int = 4,
    ) -> None:
        if every < 1:
            raise ValueError("every must be >= 1")
        self.model = model
        self.optimizer = optimizer
        self.every = int(every)
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.step = 0
        self.closed = False
        self._sampled = False
        self._snapshot: list[Any] | None = None
        self._loss: float | None = None
        self._seen_forward = False
        self._last_findings_write = 0.0
        self._sampled_count = 0
        self._pending = False  # a finished sampled step whose record waits for a late record_loss
        self._forward_in_step = False
        self._rec = core.Recorder(model, optimizer, detail=detail, history=history, grad_only=True)
        self._rec.auto_detail = True
        self._update_stride = max(1, -(-int(updates_every) // self.every))  # observed steps per measurement
        # The recorder's per-module and per-parameter hooks are attached only for observed steps (`_begin`):
        # a hook that returns at once still costs a Python call per module and per parameter every step.
        # The root module's own recorder hooks stay: hooks added to a module while its forward has begun
        # (this handle starts a step from the root's pre-hook when there is no optimizer) are not called right.
        self._root_handles = [
            model.register_forward_pre_hook(self._rec._pre, with_kwargs=True),
            model.register_forward_hook(self._rec._post, with_kwargs=True),
        ]
        self._mode_modules = core.mode_sensitive_modules(model)
        self._eval_check: dict[str, Any] | None = None
        self._hooks: list[Any] = []
        if optimizer is not None:
            self._hooks.append(optimizer.register_step_pre_hook(self._opt_pre))
            self._hooks.append(optimizer.register_step_post_hook(self._opt_post))
        self._hooks.append(model.register_forward_pre_hook(self._root_pre, prepend=True))
        self._steps_fh = (self.run_dir / STEPS_FILE).open("a", encoding="utf-8")
        self._write_json(
            META_FILE,
            {
                "model": type(model).__name__,
                "params": sum(p.numel() for p in model.parameters()),
                "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
                "optimizer": type(optimizer).__name__ if optimizer is not None else None,
                "every": self.every,
                "started": time.time(),
                "torch": torch.__version__,
                "pid": os.getpid(),
            },
        )
        self._begin(0)
        atexit.register(self.close)

    # ------------------------------------------------------------------ step boundaries

    def _begin(self, step: int) -> None:
        self._sampled = step % self.every == 0
        self._loss = None
        if self._sampled and not self._rec.handles and not self.closed:
            self._rec.attach(skip_root=True)
        elif not self._sampled and self._rec.handles:
            self._rec.detach()
        if self._sampled:
            self._rec.begin_step(step)

    def _finish(self) -> None:
        self._write_pending()
        if self._sampled:
            snap, self._snapshot = self._snapshot, None
            self._rec.end_step(self._loss, snap)
            self._sampled_count += 1
            self._pending = True
        self.step += 1
        self._forward_in_step = False
        self._begin(self.step)

    def _write_pending(self) -> None:
        if not self._pending:
            return
        self._pending = False
        self._write_step()
        now = time.monotonic()
        if now - self._last_findings_write >= FINDINGS_EVERY_S or self._sampled_count <= 2:
            self.flush()

    def _opt_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._sampled and not self.closed and self._sampled_count % self._update_stride == 0:
            self._snapshot = self._rec.snapshot_params()
        return None

    def _opt_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self.closed:
            self._finish()
        return None

    def _root_pre(self, module: Any, args: Any) -> None:
        if self.closed:
            return None
        if not torch.is_grad_enabled():
            if self._eval_check is None and module.training:
                active = [n for n, m in self._mode_modules if m.training]
                if active:
                    self._eval_check = {
                        "active": active[:10],
                        "n_active": len(active),
                        "step": self.step,
                        "source": "a forward pass under torch.no_grad() (an evaluation?) with the model in training mode",
                    }
            return None
        if self.optimizer is None and self._seen_forward:
            self._finish()
        self._write_pending()
        self._seen_forward = True
        self._forward_in_step = True
        return None

    # ------------------------------------------------------------------ public

    def record_loss(self, loss: Any) -> None:
        """Tell the probe this step's loss (needed when the model's output has no `.loss`)."""
        if self.closed:
            return
        try:
            value = float(loss.detach()) if isinstance(loss, torch.Tensor) else float(loss)
        except (TypeError, ValueError):
            return
        if self._pending and not self._forward_in_step:
            # called after optimizer.step(): the loss belongs to the step that just finished
            if self._rec.losses:
                self._rec.losses[-1] = value
        elif self._sampled:
            self._loss = value

    def _stats(self) -> dict[str, Any]:
        stats = self._rec.summary(mode="live", fixed_batch=False)
        stats["eval_mode_check"] = self._eval_check
        return stats

    def findings(self) -> list[dict[str, Any]]:
        return rules.analyze(self._stats())

    def flush(self) -> None:
        """Write the current findings and per-module table to the run folder."""
        stats = self._stats()
        notes: list[str] = []
        found = rules.analyze(stats, notes)
        self._write_json(
            FINDINGS_FILE,
            {
                "updated": time.time(),
                "step": self.step,
                "sampled_steps": self._sampled_count,
                "every": self.every,
                "findings": found,
                "table": core.module_table(stats),
                "layer_grad_rms": rules.layer_grad_rms(stats),
                "internal_errors": stats.get("internal_errors", []),
                "notes": notes,
            },
        )
        self._steps_fh.flush()
        self._last_findings_write = time.monotonic()

    def close(self) -> None:
        """Finish the current step, write findings, remove every hook. Safe to call twice."""
        if self.closed:
            return
        try:
            self._write_pending()
            if self.optimizer is None and self._seen_forward and self._sampled:
                self._rec.end_step(self._loss, None)
                self._sampled_count += 1
                self._write_step()
            self._rec.active = False
            self.flush()
        finally:
            self.closed = True
            self._rec.detach()
            for h in self._root_handles:
                h.remove()
            self._root_handles = []
            for h in self._hooks:
                h.remove()
            self._hooks = []
            self._steps_fh.close()
            atexit.unregister(self.close)

    def __enter__(self) -> ProbeHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ files

    def _write_step(self) -> None:
        rec = self._rec
        k = rec.last_step if rec.last_step is not None else rec.step
        modules: dict[str, float] = {}
        nonfinite: list[str] = []
        updates: list[float] = []
        for (name, p), owner, s in zip(rec.params, rec.owner, rec.pstats, strict=True):
            if not p.requires_grad or not s.grad_norms:
                continue
            g = s.grad_norms[-1]
            if g is None:
                continue
            if not math.isfinite(g):
                nonfinite.append(name)
                continue
            modules[owner] = modules.get(owner, 0.0) + g * g
            if s.update_ratios and s.changed_steps and s.changed_steps[-1] == k:
                r = s.update_ratios[-1]
                if r is not None and p.dim() >= 2:
                    updates.append(r)
        loss = rec.losses[-1] if rec.losses else None
        record = {
            "step": k,
            "loss": rules._f(loss) if loss is not None else None,
            "grad_norm": rules._f(rec.global_grad_norms[-1]) if rec.global_grad_norms else None,
            "module_grad_norms": {m or "(model)": round(math.sqrt(v), 8) for m, v in modules.items()},
            "median_update_ratio": rules._f(sorted(updates)[len(updates) // 2]) if updates else None,
            "nonfinite_grads": nonfinite[:10],
            "time": round(time.time(), 3),
        }
        self._steps_fh.write(json.dumps(record, allow_nan=False) + "\n")
        if len(rec.losses) > 4 * (rec.history or 64):
            rec.trim(2 * (rec.history or 64))

    def _write_json(self, name: str, payload: dict[str, Any]) -> None:
        path = self.run_dir / name
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(payload, allow_nan=False, default=str), encoding="utf-8")
        os.replace(tmp, path)


def attach(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    every: int = 16,
    run_dir: str | os.PathLike[str] = "trainsleuth-probe",
    *,
    detail: bool = False,
    history: int = 64,
    updates_every: int = 4,
) -> ProbeHandle:
    """Observe `model` (and `optimizer`) every `every` steps; statistics go to `run_dir`.

    Update ratios (which need a copy of the weights around the optimizer step) are measured on one
    observed step in every ceil(updates_every / every), i.e. about every `updates_every` steps. Backward NaN-origin hooks on
    module inputs/outputs (`detail`) switch on by themselves after a non-finite gradient is seen.
    """
    return ProbeHandle(
        model, optimizer, every, run_dir, detail=detail, history=history, updates_every=updates_every
    )


__all__ = ["ProbeHandle", "attach"]

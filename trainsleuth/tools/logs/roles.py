"""Map metric names to roles (loss, val_loss, grad_norm, lr, ...) while keeping the names."""

from __future__ import annotations

import re
from functools import lru_cache

ROLES = (
    "loss",
    "val_loss",
    "loss_component",
    "grad_norm",
    "lr",
    "loss_scale",
    "throughput",
    "step_time",
    "accuracy",
    "val_accuracy",
    "perplexity",
    "reward",
    "kl",
    "entropy",
    "skipped",
    "nan_iterations",
    "epoch",
    "step",
    "batch_size",
    "memory",
    "progress",
    "other",
)

STEP_KEYS = (
    "iteration",
    "iter",
    "global_step",
    "trainer/global_step",
    "step",
    "num_updates",
    "updates",
    "update",
    "_step",
    "steps",
    "it",
)

_PRIMARY_LOSS = {
    "loss",
    "lm loss",
    "lm_loss",
    "train_loss",
    "train loss",
    "train/loss",
    "training_loss",
    "training loss",
    "train/lm_loss",
    "train_loss_step",
    "train/loss_step",
    "loss_step",
    "total_loss",
    "train/total_loss",
    "train_loss_epoch",
    "loss_epoch",
}

_VAL = re.compile(
    r"(^|[\s/_.\-])(val|valid|validation|eval|evaluation|test|dev)([\s/_.\-]|$)|^(val|eval|valid|test)"
)


@lru_cache(maxsize=4096)
def role_of(name: str) -> str:
    n = " ".join(name.strip().lower().split())
    is_val = bool(_VAL.search(n))
    last = re.split(r"[/.]", n)[-1]
    if n in STEP_KEYS or last in ("global_step", "step", "iteration", "iter"):
        return "step"
    if "skipped" in n:
        return "skipped"
    if "nan iter" in n or "nan_iter" in n:
        return "nan_iterations"
    if "loss scale" in n or "loss_scale" in n or "lossscale" in n or n in ("scale", "grad_scale", "scaler"):
        return "loss_scale"
    if ("grad" in n and "norm" in n) or last in ("gnorm", "grad_norm", "gradnorm", "grad_l2"):
        return "grad_norm"
    if "ppl" in n.split() or "ppl" in last or "perplexity" in n:
        return "perplexity"
    if "loss" in n:
        if is_val:
            return "val_loss"
        if n in _PRIMARY_LOSS or last in _PRIMARY_LOSS:
            return "loss"
        return "loss_component"
    if (
        last in ("lr", "learning_rate", "learning rate")
        or "learning rate" in n
        or "learning_rate" in n
        or (re.search(r"(^|[/_\s])lr($|[/_\s\-])", n))
    ):
        return "lr"
    if "acc" in last or "accuracy" in n:
        return "val_accuracy" if is_val else "accuracy"
    if "reward" in n or "return" in last:
        return "reward"
    if re.search(r"(^|[/_\s])kl($|[/_\s])", n) or "kl_div" in n or "approx_kl" in n:
        return "kl"
    if "entropy" in n:
        return "entropy"
    if any(t in n for t in ("per second", "per_second", "/s", "_per_sec", "tflops", "mfu", "wps", "ups",
                            "throughput", "it/s", "samples/sec", "tokens/sec", "tok/s")):  # fmt: skip
        return "throughput"
    if "elapsed time per iteration" in n or any(t in n for t in ("step_time", "iter_time", "time per",
                                                                 "batch_time", "s/it", "train_wall")):  # fmt: skip
        return "step_time"
    if last in ("time", "dt", "time_ms") or n.endswith("time (ms)"):
        return "step_time"
    if "epoch" in n:
        return "epoch"
    if "batch size" in n or "batch_size" in n or last in ("bsz", "wpb"):
        return "batch_size"
    if "mem" in n:
        return "memory"
    if "consumed" in n or "samples" in n or "tokens" in n:
        return "progress"
    return "other"


# Roles where a higher value is better (used by throughput_drop and plots).
HIGHER_IS_BETTER = {"throughput", "accuracy", "val_accuracy", "reward"}

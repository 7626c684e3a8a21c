"""Map metric names to roles (loss, val_loss, grad_norm, lr, ...) while keeping the names.

A name is split into words (`train/CrossEntropyLoss` -> train, cross, entropy, loss;
`val_loss` -> val, loss) and read through a small vocabulary:

| words | role |
|---|---|
| loss, nll, xent, cross entropy, ce (with `train`/`total`/`lm` or nothing else) | `loss` |
| `trl` (llm.c's train loss) | `loss` |
| loss words with val, valid, validation, eval, evaluation, test, dev, holdout; `tel` (llm.c) | `val_loss` |
| loss words with another qualifier (`loss_cls`, `loss_bbox`, `kl_loss`, `aux_loss`) | `loss_component` |
| grad + norm, gnorm, grad_l2 | `grad_norm` |
| lr, learning rate | `lr` |
| loss scale, grad scale, scaler | `loss_scale` |
| tok/s, samples/s, it/s, wps, ups, tflops, mfu, throughput | `throughput` |
| time, dt, step time, ms per step, s/it, elapsed time per iteration | `step_time` |
| acc, accuracy (val words: `val_accuracy`) | `accuracy` |
| bpb, bpc (bits per byte/char) | like loss words |
| ppl, perplexity; reward/return/rew; kl; entropy; epoch; batch size; mem; consumed/samples/tokens | their roles |

The vocabulary is only a prior: `infer.assign_roles` confirms or corrects it from how each series
behaves over the whole log, and a user's `--role loss=NAME` overrides both.
"""

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
    "error_rate",
    "val_error",
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

_LOSS_WORDS = {
    "loss", "losses", "nll", "xent", "crossentropy", "crossentropyloss", "objective", "bpb", "bpc",
    "logloss", "mlogloss", "rmse", "mse", "mae",
}  # fmt: skip
# words that may sit beside a loss word without making it a component of the loss
_PRIMARY_WORDS = {
    "train", "training", "tr", "total", "lm", "step", "epoch", "avg", "average", "mean", "running",
    "smoothed", "smooth", "overall", "main", "batch", "iter", "ce", "clm", "causal", "reduced",
    "multi", "binary", "s",
}  # fmt: skip
_VAL_WORDS = {"val", "valid", "validation", "eval", "evaluation", "test", "dev", "holdout", "tel", "validate"}
_ABBREV = {"trl": "loss", "tel": "val_loss", "tl": "loss", "vl": "val_loss"}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[\s/._\-:()\[\],']+")


def is_canonical_loss(name: str) -> bool:
    """A name that is the training loss as most trainers spell it (`loss`, `train_loss`, `lm loss`)."""
    return " ".join(name.strip().lower().split()) in _PRIMARY_LOSS


def words(name: str) -> list[str]:
    """`train/CrossEntropyLoss` -> ["train", "cross", "entropy", "loss"]."""
    return [w for w in _SPLIT.split(_CAMEL.sub(" ", name).lower()) if w]


@lru_cache(maxsize=4096)
def role_of(name: str) -> str:
    n = " ".join(name.strip().lower().split())
    ws = words(name)
    wset = set(ws)
    is_val = bool(wset & _VAL_WORDS)
    last = re.split(r"[/.]", n)[-1]
    if n in _ABBREV:
        return _ABBREV[n]
    if n in STEP_KEYS or last in ("global_step", "step", "iteration", "iter"):
        return "step"
    if "skipped" in n:
        return "skipped"
    if "nan iter" in n or "nan_iter" in n:
        return "nan_iterations"
    if "loss scale" in n or "loss_scale" in n or "lossscale" in n or n in ("scale", "grad_scale", "scaler"):
        return "loss_scale"
    if ("grad" in n and "norm" in n) or last in ("gnorm", "grad_norm", "gradnorm", "grad_l2", "norm"):
        return "grad_norm"
    if "ppl" in ws or "ppl" in last or "perplexity" in n:
        return "perplexity"
    if wset & _LOSS_WORDS or "loss" in n or re.search(r"(^|[/_\s.\-])(m?error|err)($|[/_\s.\-])", n):
        if not (wset & _LOSS_WORDS or "loss" in n):  # an error rate: lower is better, not the loss
            return "val_error" if is_val else "error_rate"
        if is_val:
            return "val_loss"
        rest = wset - _LOSS_WORDS - _PRIMARY_WORDS - _VAL_WORDS
        if "cross" in rest and "entropy" in rest:  # CrossEntropyLoss: the kind of loss, not a part of it
            rest -= {"cross", "entropy"}
        if not rest or n in _PRIMARY_LOSS:
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
    if "reward" in n or "return" in last or "rew" in wset:
        return "reward"
    if re.search(r"(^|[/_\s])kl($|[/_\s])", n) or "kl_div" in n or "approx_kl" in n:
        return "kl"
    if "entropy" in n:
        return "entropy"
    if any(t in n for t in ("per second", "per_second", "/s", "_per_sec", "tflops", "mfu", "wps", "ups",
                            "throughput", "it/s", "samples/sec", "tokens/sec", "tok/s")):  # fmt: skip
        return "throughput"
    if "elapsed time per iteration" in n or any(t in n for t in ("step_time", "iter_time", "time per",
                                                                 "batch_time", "s/it", "train_wall",
                                                                 "step_avg", "ms/step")):  # fmt: skip
        return "step_time"
    if last in ("time", "dt", "time_ms") or n.endswith(("time (ms)", "time (s)")):
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


# Names that are the loss whatever else the vocabulary says (kept from the first vocabulary).
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

# Roles where a higher value is better (used by throughput_drop and plots).
HIGHER_IS_BETTER = {"throughput", "accuracy", "val_accuracy", "reward"}
# Roles whose series can be the loss a verdict is about, best first.
LOSS_ROLES = ("loss", "loss_component", "val_loss")

"""Probe rules on the loss: its trend on the fixed batch, and the balance of its terms. Stdlib only.

Whether the loss should have gone down is judged from the steps' own first-order prediction
(sum over parameters of grad . dW): when the learning rate is sensible but the steps could only
have moved the loss by a hair (a warmup, a flat start), a flat loss says nothing and is not reported.
"""

import math

try:
    from ._ts_probe_util import THRESHOLDS, _f, _finite, _num, finding
except ImportError:  # the runner's own folder (user's interpreter)
    from _ts_probe_util import THRESHOLDS, _f, _finite, _num, finding  # type: ignore[no-redef]


def loss_trend(losses, fixed_batch=True, step_offset=0, steps=None):
    """loss_not_decreasing / loss_diverging from a loss series (finite prefix only)."""
    t = THRESHOLDS
    vals = []
    for x in losses:
        x = _num(x)
        if x is None or not math.isfinite(x):
            break
        vals.append(x)
    steps = steps or list(range(step_offset, step_offset + len(vals)))
    if len(vals) < 3:
        return []
    first, last = vals[0], vals[-1]
    if fixed_batch:
        rising = last > first * t["loss_diverge"] and first > 0 and last >= max(vals) * 0.999
        window_first, window_last = first, last
    else:  # batches differ from step to step: every late loss must exceed every early one by the margin
        if len(vals) < 6:
            return []
        k = max(2, len(vals) // 3)
        window_first = max(vals[:k])
        window_last = min(vals[-k:])
        rising = window_first > 0 and window_last > window_first * t["loss_diverge"]
    if rising:
        return [
            finding(
                "loss_diverging",
                "error",
                (
                    f"The loss rises from {window_first:.4g} to {window_last:.4g} across probe steps "
                    f"(reference: the first steps' loss; threshold {t['loss_diverge']}x)."
                    if fixed_batch
                    else f"The loss rises: every one of the last {k} steps' losses (at least {window_last:.4g}) is "
                    f"over {t['loss_diverge']}x every one of the first {k} (at most {window_first:.4g})."
                ),
                step=steps[0],
                metric="loss",
                evidence={
                    "losses": [_f(x) for x in vals[:50]],
                    "threshold_ratio": t["loss_diverge"],
                    "fixed_batch": fixed_batch,
                },
            )
        ]
    if fixed_batch and abs(first) > 1e-6 and len(vals) >= 5:
        best = min(vals[1:])
        if best > first - t["loss_min_drop"] * abs(first):
            return [
                finding(
                    "loss_not_decreasing",
                    "warning",
                    f"{len(vals)} steps on one fixed batch do not bring the loss down (from {first:.4g}, best "
                    f"{best:.4g}): the model cannot even overfit one batch.",
                    step=steps[0],
                    metric="loss",
                    evidence={"losses": [_f(x) for x in vals[:50]], "min_relative_drop": t["loss_min_drop"]},
                )
            ]
    return []


def predicted_drop(stats, steps, losses):
    """The relative loss decrease the steps' updates predict to first order (-sum g.dW / |L0|), or None."""
    pcs = [_num(x) for x in (stats.get("predicted_changes") or [])[:steps]]
    pcs = [x for x in pcs if x is not None and math.isfinite(x)]
    first = _num(losses[0]) if losses else None
    if not pcs or not first or not math.isfinite(first):
        return None
    return -sum(pcs) / abs(first)


NON_STATIONARY = {
    "adversarial": "in an adversarial pair neither network's loss is meant to go down",
    "rl": "returns and advantages change with the policy at every step",
}


def trend_rules(stats, steps, losses, update_findings, notes):
    if not (stats.get("updates_measured") or stats.get("mode") == "step_fn"):
        return []
    if stats.get("loss_trend") is False:  # several losses, one per optimizer: no single series to judge
        return []
    moving = [NON_STATIONARY[r["name"]] for r in stats.get("regimes") or [] if r["name"] in NON_STATIONARY]
    if moving:
        notes.append(f"The loss trend is not judged: {'; '.join(moving)}.")
        return []
    found = loss_trend(losses[:steps], fixed_batch=stats.get("fixed_batch", True))
    flat = [f for f in found if f["code"] == "loss_not_decreasing"]
    if not flat:
        return found
    drop = predicted_drop(stats, steps, losses)
    low_lr = any(f["code"] == "update_ratio_low" for f in update_findings)
    anything_moved = any(p.get("changed_steps") for p in stats.get("params", []) if p.get("requires_grad"))
    if drop is not None and anything_moved and not low_lr and drop < THRESHOLDS["predicted_min_drop"]:
        notes.append(
            f"The loss barely moved over {steps} steps, but the updates themselves predict only a "
            f"{max(drop, 0):.2%} decrease to first order (sum of grad . dW), below "
            f"{THRESHOLDS['predicted_min_drop']:.0%}: the learning rate at this point of the schedule is too "
            "small to judge whether the model can fit one batch; probe more steps or past the warmup."
        )
        return [f for f in found if f["code"] != "loss_not_decreasing"]
    for f in flat:
        if drop is not None:
            f["evidence"]["predicted_relative_drop"] = _f(drop)
            f["evidence"]["reference"] = "the decrease the updates predict to first order (sum of grad . dW)"
    return found


def component_rules(stats):
    t = THRESHOLDS
    terms = stats.get("term_grad_norms") or {}
    vals = {k: _num(v) for k, v in terms.items() if _finite(v) and _num(v) > 0}
    if len(vals) < 2:
        return []
    hi = max(vals, key=lambda k: vals[k])
    lo = min(vals, key=lambda k: vals[k])
    if vals[hi] / vals[lo] < t["component_ratio"]:
        return []
    return [
        finding(
            "loss_component_imbalance",
            "warning",
            f"The loss term {hi!r} sends {vals[hi] / vals[lo]:.3g}x more gradient into the shared parameters "
            f"than {lo!r}: the loss weighting lets one term dominate.",
            step=0,
            metric=hi,
            evidence={
                "term_grad_norms": {k: _f(v) for k, v in terms.items()},
                "shared_params": stats.get("shared_params"),
                "threshold": t["component_ratio"],
            },
        )
    ]

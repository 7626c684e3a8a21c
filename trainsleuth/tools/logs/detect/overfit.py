"""Overfitting: the validation loss turns up while the training loss keeps improving."""

from __future__ import annotations

from statistics import median

from trainsleuth.tools.findings import Finding
from trainsleuth.tools.logs.detect.common import as_step, finding, is_signed, r6, timeline
from trainsleuth.tools.logs.series import Series


def detect_overfitting(val: Series, train: Series) -> Finding | None:
    vsteps, vvals, _ = timeline(val)
    tsteps, tvals, _ = timeline(train)
    if len(vvals) < 4 or len(tvals) < 6 or is_signed(vvals):
        return None
    mi = min(range(len(vvals)), key=lambda i: vvals[i])
    vmin = vvals[mi]
    after = vvals[mi + 1 :]
    if len(after) < 2:
        return None
    margin = max(0.05 * abs(vmin), 1e-6)
    if not all(v > vmin + margin for v in after[-2:]) or vvals[-1] < vmin + margin:
        return None
    near = [v for st, v in zip(tsteps, tvals, strict=False) if st <= vsteps[mi]][-5:]
    later = [v for st, v in zip(tsteps, tvals, strict=False) if st > vsteps[mi]][-5:]
    if not near or not later:
        return None
    t_then, t_now = median(near), median(later)
    if not t_now < t_then * 0.98:
        return None
    first_bad = next(i for i in range(mi + 1, len(vvals)) if vvals[i] > vmin + margin)
    # it starts with the first evaluation after the best one; `confirmed_step` is the first that is
    # clearly (by the margin) worse
    return finding(
        "overfitting",
        "warning",
        f"{val.name} is lowest ({r6(vmin)}) at step {as_step(vsteps[mi])} and worsens to {r6(vvals[-1])} while "
        f"{train.name} keeps improving ({r6(t_then)} -> {r6(t_now)}).",
        step=vsteps[mi + 1],
        metric=val.name,
        confirmed_step=as_step(vsteps[first_bad]),
        best=r6(vmin),
        best_step=as_step(vsteps[mi]),
        last=r6(vvals[-1]),
        last_step=as_step(vsteps[-1]),
        train_metric=train.name,
        train_at_best=r6(t_then),
        train_last=r6(t_now),
    )

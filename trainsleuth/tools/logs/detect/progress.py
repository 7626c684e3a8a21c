"""Progress of a loss: none from the start, none after an early drop, a validation loss that
stalls early (all `plateau`), and persistent alternation (`oscillation`)."""

from __future__ import annotations

import itertools
import math
import re
from statistics import median

from trainsleuth.tools.findings import Finding
from trainsleuth.tools.logs.detect.common import as_step, finding, r6, step_spacing, timeline
from trainsleuth.tools.logs.series import Series

MIN_RECORDS = 5  # fewer records than this say nothing about progress
NO_PROGRESS = 0.01  # less than 1 % better: no meaningful progress
EARLY = 0.2  # an early drop: within the first 20 % of the run's steps
STALLED = 0.6  # ... and nothing after it for at least 60 % of the run's steps


def _chance(level: float) -> str | None:
    """`ln(k)` for small k is the cross-entropy of guessing uniformly among k classes."""
    for k in range(2, 21):
        if abs(level - math.log(k)) <= 0.01 * math.log(k):
            return f"ln({k}) = {math.log(k):.4f}, the loss of guessing uniformly among {k} classes"
    return None


def plateau(s: Series, steps: list[float], vals: list[float]) -> Finding | None:
    """A loss that never moved from its start, or that fell once at the very start and never
    again (a run that did not learn). A run that learns and then converges is not a plateau."""
    n = len(vals)
    if n < MIN_RECORDS or len(set(vals)) <= 2:
        return None
    if n < 50 and not _from_start(steps):
        return None  # a short excerpt from the middle of a run says nothing about learning
    k = max(1, min(n // 10, 20)) if n < 50 else max(5, n // 10)
    first, last = median(vals[:k]), median(vals[-k:])
    if first <= 0:
        return None
    improvement = (first - last) / first
    if improvement < NO_PROGRESS and last <= first * 1.1:
        chance = _chance(median(vals))
        return finding(
            "plateau",
            "warning",
            f"{s.name} never moves from its start: median {r6(first)} over the first {k} records and "
            f"{r6(last)} over the last {k} ({improvement * 100:.2f}% better); the run is not learning"
            + (f" (it sits at {chance})." if chance else "."),
            step=steps[0],
            metric=s.name,
            first_window_median=r6(first),
            last_window_median=r6(last),
            relative_improvement=r6(improvement),
            window_points=k,
            last_step=as_step(steps[-1]),
            from_start=True,
            chance_level=chance,
        )
    return _stalled_after_early_drop(s, steps, vals)


_R2_NAME = re.compile(r"(?:^|[_/.\s-])(?:r\^?2|r_?squared|r2_score)$", re.I)
R2_AT_MEAN = 0.05  # the last records' median R^2 at most this: no better than predicting the mean
R2_NEVER_ABOVE = 0.2  # ... and never above this anywhere in the run


def is_r2(name: str) -> bool:
    """`r2`, `train_r2`, `val/R2`, `r_squared`, `r2_score`: the coefficient of determination."""
    return bool(_R2_NAME.search(name))


def r2_at_mean(s: Series) -> Finding | None:
    """A regression metric R^2 that stays near 0 for the whole run: predicting the mean of the targets
    scores exactly 0, so the model explains none of the variance however the loss moved (a loss can
    fall a little and settle while the model learns a constant)."""
    steps, vals, _ = timeline(s)
    vals = [v for v in vals if math.isfinite(v)]
    if len(vals) < 3 or not _from_start(steps):
        return None
    k = max(1, len(vals) // 5)
    last, peak = median(vals[-k:]), max(vals)
    if last > R2_AT_MEAN or peak > R2_NEVER_ABOVE:
        return None
    return finding(
        "plateau",
        "warning",
        f"{s.name} stays near 0 for the whole run (at most {r6(peak)}, {r6(last)} over the last {k} records): "
        "an R^2 of 0 is what always predicting the mean of the targets scores, so the model explains next to "
        "none of the variance; it is not learning from its inputs.",
        step=steps[0],
        metric=s.name,
        last_window_median=r6(last),
        max_value=r6(peak),
        window_points=k,
        last_step=as_step(steps[-1]),
        from_start=True,
        baseline="R^2 = 0 (predicting the mean)",
    )


def _from_start(steps: list[float]) -> bool:
    """The log begins near the start of training (its first step is within a few logging
    intervals or a tenth of its last step), so "from the start" means what it says."""
    spacing = step_spacing(steps)
    return steps[0] <= max(3 * spacing, 0.1 * steps[-1])


def _stalled_after_early_drop(s: Series, steps: list[float], vals: list[float]) -> Finding | None:
    """Fell within the first EARLY of the run, kept most of its level (the drop took off less than
    half the loss) and made no progress over the remaining, at least STALLED of the run."""
    span = steps[-1] - steps[0]
    if span <= 0 or vals[0] <= 0 or not _from_start(steps):
        return None
    tail = max(1, len(vals) // 10)
    end_level = median(vals[-tail:])
    for i in range(1, len(vals) - MIN_RECORDS + 2):
        if steps[i] - steps[0] > EARLY * span:
            break
        if steps[-1] - steps[i] < STALLED * span:
            break
        level = vals[i]
        if level < 0.5 * vals[0]:
            break  # the early drop took most of the loss off: that is learning
        best_after = min(vals[i:])
        if (level - best_after) / level < NO_PROGRESS and end_level <= level * 1.1:
            chance = _chance(median(vals[i:]))
            return finding(
                "plateau",
                "warning",
                f"{s.name} falls from {r6(vals[0])} to {r6(level)} by step {as_step(steps[i])} and makes no "
                f"progress after that ({r6(level)} -> best {r6(best_after)}, last {r6(vals[-1])}) over "
                f"{(steps[-1] - steps[i]) / span * 100:.0f}% of the run"
                + (f"; it sits at {chance}." if chance else "."),
                step=steps[i],
                metric=s.name,
                start_value=r6(vals[0]),
                stalled_level=r6(level),
                best_after=r6(best_after),
                last=r6(vals[-1]),
                last_step=as_step(steps[-1]),
                stalled_fraction=r6((steps[-1] - steps[i]) / span),
                chance_level=chance,
            )
    return None


def val_stall(val: Series, train: Series) -> Finding | None:
    """The validation loss stops improving early (its best comes in the first 40 % of its records)
    and never beats it again over a run of 8+ evaluations, while the training loss keeps falling
    (by 10 % or more): the extra steps only memorise. A rise of 5 % or more is `overfitting`."""
    vsteps, vvals, _ = timeline(val)
    tsteps, tvals, _ = timeline(train)
    n = len(vvals)
    if n < 8 or len(tvals) < 5 or min(vvals) <= 0:
        return None
    best = min(range(n), key=lambda i: vvals[i])
    if best > 0.4 * (n - 1) or n - best < 5:
        return None
    after = [v for st, v in zip(tsteps, tvals, strict=False) if st > vsteps[best]]
    before = [v for st, v in zip(tsteps, tvals, strict=False) if st <= vsteps[best]]
    if len(after) < 3 or not before:
        return None
    t_then, t_now = median(before[-3:]), median(after[-3:])
    if not (t_then > 0 and t_now <= 0.9 * t_then):
        return None
    return finding(
        "plateau",
        "warning",
        f"{val.name} stops improving at step {as_step(vsteps[best])} ({r6(vvals[best])}) and no later "
        f"evaluation beats it ({n - best - 1} more, last {r6(vvals[-1])}), while {train.name} keeps falling "
        f"({r6(t_then)} -> {r6(t_now)}): the later steps only fit the training data.",
        step=vsteps[best],
        metric=val.name,
        best=r6(vvals[best]),
        best_step=as_step(vsteps[best]),
        last=r6(vvals[-1]),
        last_step=as_step(vsteps[-1]),
        evaluations_after=n - best - 1,
        train_metric=train.name,
        train_at_best=r6(t_then),
        train_last=r6(t_now),
    )


def oscillation(s: Series, steps: list[float], vals: list[float]) -> Finding | None:
    n = len(vals)
    if n < 62:
        return None
    half = vals[n // 2 :]
    diffs = [b - a for a, b in itertools.pairwise(half) if b != a]
    if len(diffs) < 30:
        return None
    changes = sum((a > 0) != (b > 0) for a, b in itertools.pairwise(diffs))
    frac = changes / (len(diffs) - 1)
    amp = median([abs(d) for d in diffs])
    level = abs(median(half))
    if frac < 0.9 or amp < 0.1 * level:
        return None
    # the second half settles it; the alternation may start earlier: walk back while each record
    # still swings (by at least half the typical swing) the other way from the one after it
    start = n // 2
    while start >= 2:
        d1 = vals[start] - vals[start - 1]
        d0 = vals[start - 1] - vals[start - 2]
        if (d0 > 0) == (d1 > 0) or min(abs(d0), abs(d1)) < 0.5 * amp or d0 == 0:
            break
        start -= 1
    if start == 1 and abs(vals[1] - vals[0]) >= 0.5 * amp:
        start = 0  # alternating from the first record
    return finding(
        "oscillation",
        "warning",
        f"{s.name} alternates up and down on {frac * 100:.0f}% of consecutive records over the second half "
        f"of the log (typical swing {r6(amp)} around {r6(level)}) instead of converging"
        + (f"; the alternation starts at step {as_step(steps[start])}." if start < n // 2 else "."),
        step=steps[start],
        metric=s.name,
        confirmed_step=as_step(steps[n // 2]) if start < n // 2 else None,
        alternation=r6(frac),
        typical_swing=r6(amp),
        level=r6(level),
        records=len(half),
    )

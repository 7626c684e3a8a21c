"""Progress of a loss: no progress at all (plateau) and persistent alternation (oscillation)."""

from __future__ import annotations

import itertools
from statistics import median

from trainsleuth.tools.findings import Finding
from trainsleuth.tools.logs.detect.common import as_step, finding, r6
from trainsleuth.tools.logs.series import Series


def plateau(s: Series, steps: list[float], vals: list[float]) -> Finding | None:
    n = len(vals)
    if n < 50:
        return None
    k = max(5, n // 10)
    first, last = median(vals[:k]), median(vals[-k:])
    if first == 0 or len(set(vals)) <= 2:
        return None
    improvement = (first - last) / abs(first)
    if improvement >= 0.01 or last > first * 1.1:
        return None
    return finding(
        "plateau",
        "warning",
        f"{s.name} makes no meaningful progress over the whole log: median {r6(first)} over the first "
        f"{k} records and {r6(last)} over the last {k} ({improvement * 100:.2f}% better).",
        step=steps[0],
        metric=s.name,
        first_window_median=r6(first),
        last_window_median=r6(last),
        relative_improvement=r6(improvement),
        window_points=k,
        last_step=as_step(steps[-1]),
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

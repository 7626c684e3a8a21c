"""Throughput (tokens/s, samples/s, MFU) or step time that regresses and stays regressed."""

from __future__ import annotations

import itertools
import math

from trainsleuth.tools.findings import Finding
from trainsleuth.tools.logs.detect.common import as_step, finding, r6, rolling_median, timeline
from trainsleuth.tools.logs.series import Series


def detect_throughput(s: Series, batch_changes: bool) -> Finding | None:
    if s.role == "step_time" and batch_changes:
        return None
    steps, vals, _ = timeline(s)
    n = len(vals)
    if n < 20 or any(v <= 0 for v in vals):
        return None
    if s.role == "step_time" and sum(b >= a for a, b in itertools.pairwise(vals)) >= 0.95 * (n - 1):
        return None  # a clock (time since the start, YOLO's `time` column), not the time of a step
    w = max(5, n // 10)
    rm = rolling_median(vals, w)[w - 1 :]
    rsteps = steps[w - 1 :]
    higher = s.role == "throughput"
    cut = max(1, int(len(rm) * 0.7))
    ref = max(rm[:cut]) if higher else min(rm[:cut])
    final = rm[-1]
    ratio = final / ref if higher else ref / final
    if ratio > 0.7:
        return None
    tail = vals[-w:]
    bad = [v for v in tail if (v < ref * 0.85 if higher else v > ref / 0.85)]
    if len(bad) < 0.8 * len(tail):
        return None
    k = len(rm) - 1
    while k > 0 and (rm[k - 1] < ref * 0.85 if higher else rm[k - 1] > ref / 0.85):
        k -= 1
    # The trailing median crosses only once most of its window is slow: the change itself is the
    # split of the records before that point into "at the old level" then "at the new level"
    # with the fewest records on the wrong side (split between the two levels).
    confirmed = k + w - 1
    mid = math.sqrt(ref * final)
    lo, hi = max(0, confirmed - 2 * w), min(n, confirmed + w)
    slow = [(v < mid if higher else v > mid) for v in vals[lo:hi]]
    wrong = sum(not x for x in slow)  # split at lo: every fast record is on the wrong side
    onset, best = lo, wrong
    for c in range(lo + 1, confirmed + 1):
        wrong += 1 if slow[c - 1 - lo] else -1
        if wrong < best:
            onset, best = c, wrong
    return finding(
        "throughput_drop",
        "warning",
        f"{s.name} regresses from about {r6(ref)} to {r6(final)} from step {as_step(steps[onset])} on and stays "
        f"there ({(1 - ratio) * 100:.0f}% slower).",
        step=steps[onset],
        metric=s.name,
        confirmed_step=as_step(rsteps[k]),
        reference=r6(ref),
        final=r6(final),
        slowdown=r6(1 - ratio),
        window_points=w,
        role=s.role,
    )

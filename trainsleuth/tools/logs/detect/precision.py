"""fp16 dynamic loss scaling: the scale collapsing, and steps the trainer skipped."""

from __future__ import annotations

import itertools
import math

from trainsleuth.tools.findings import Finding
from trainsleuth.tools.logs.detect.common import as_step, finding, r6, timeline
from trainsleuth.tools.logs.series import Series


def detect_loss_scale(s: Series) -> tuple[list[Finding], list[float]]:
    """Returns findings and the steps where the scale fell (each fall is an overflow, a skipped step)."""
    steps, vals, _ = timeline(s)
    out: list[Finding] = []
    falls: list[float] = []
    if len(vals) < 3 or s.width > 1:
        return out, falls
    increased = False
    i = 1
    n = len(vals)
    while i < n:
        if vals[i] > vals[i - 1]:
            increased = True
        if vals[i] < vals[i - 1]:
            start = i - 1
            j = i
            decreases = 0
            last_drop = i
            # a run of drops, each within 3 records of the previous one, with no increase between
            while j < n and vals[j] <= vals[j - 1] and j - last_drop <= 3:
                if vals[j] < vals[j - 1]:
                    decreases += 1
                    falls.append(steps[j])
                    last_drop = j
                j += 1
            j = last_drop + 1
            top, bottom = vals[start], vals[j - 1]
            factor = top / bottom if bottom > 0 else math.inf
            at_min = bottom <= 1.0
            if at_min or (increased and decreases >= 2 and factor >= 8):
                out.append(
                    finding(
                        "loss_scale_collapse",
                        "error" if at_min else "warning",
                        f"{s.name} falls from {r6(top)} to {r6(bottom)} ({decreases} drops over steps "
                        f"{as_step(steps[start])}-{as_step(steps[j - 1])})"
                        + (": it reached its minimum." if at_min else ": repeated fp16 overflows."),
                        step=steps[i],
                        metric=s.name,
                        start_scale=r6(top),
                        end_scale=r6(bottom),
                        factor=r6(factor),
                        drops=decreases,
                        last_step=as_step(steps[j - 1]),
                    )
                )
            increased = increased or False
            i = j
            continue
        i += 1
    return out, falls


def detect_skipped(
    counters: list[Series],
    scale_falls: list[float],
    overflow_steps: list[float],
    repeated_grad: list[float],
    records: int,
    first_step: float | None,
    last_step: float | None,
) -> Finding | None:
    steps: list[float] = []
    reported = 0
    for s in counters:
        st, vals, _ = timeline(s)
        cumulative = len(vals) > 1 and all(b >= a for a, b in itertools.pairwise(vals))
        reported += (
            int(max(vals, default=0) - vals[0]) if cumulative and vals else int(sum(v for v in vals if v > 0))
        )
        for a, v, prev in zip(st, vals, [0.0, *vals[:-1]], strict=False):
            if (v > prev) if cumulative else (v > 0):
                steps.append(a)
    unique = set(steps)
    if not overflow_steps:  # without overflow messages, scale drops and repeated grad norms are the trace
        unique |= set(scale_falls) | set(repeated_grad)
    # one overflow message is one skipped step, even when several fall under one logged step
    steps = sorted(unique) + list(overflow_steps)
    if not steps:
        return None
    ordered = sorted(steps)
    span = (last_step - first_step) if first_step is not None and last_step is not None else 0
    early_limit = (first_step or 0) + 0.05 * span
    late = [x for x in ordered if x > early_limit]
    cluster = _max_cluster(late, max(1.0, span / max(1, records)) * 10)
    frac = len(set(steps)) / max(1, records)
    sev = "warning" if cluster >= 4 or (frac >= 0.05 and len(late) >= 4) else "info"
    sources = [
        name
        for name, present in (
            ("skip counters", bool(reported)),
            ("loss-scale drops", bool(scale_falls)),
            ("overflow messages", bool(overflow_steps)),
            ("repeated grad norm", bool(repeated_grad)),
        )
        if present
    ]
    return finding(
        "skipped_steps",
        sev,
        f"The trainer skipped steps ({len(steps)} skips, first at step {as_step(ordered[0])}; "
        f"seen from {', '.join(sources)})"
        + (
            "; they cluster, which points at repeated overflows."
            if sev == "warning"
            else "; isolated skips are normal early in fp16 runs."
        ),
        step=ordered[0],
        metric=next(
            (c.name for c in counters if c.finite_points and max(c.timeline()[1], default=0) > 0), None
        ),
        steps=[as_step(x) for x in ordered[:50]],
        count=len(steps),
        reported_by_trainer=reported or None,
        largest_cluster=cluster,
        sources=sources,
    )


def _max_cluster(steps: list[float], width: float) -> int:
    best = 0
    j = 0
    for i in range(len(steps)):
        while steps[i] - steps[j] > width:
            j += 1
        best = max(best, i - j + 1)
    return best

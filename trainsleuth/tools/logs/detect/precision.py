"""fp16 dynamic loss scaling: the scale collapsing, and steps the trainer skipped."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from trainsleuth.tools.findings import Finding
from trainsleuth.tools.logs.detect.common import as_step, finding, r6, step_spacing, timeline
from trainsleuth.tools.logs.series import Series


def detect_loss_scale(s: Series) -> tuple[list[Finding], list[float]]:
    """Returns findings and the steps where the scale fell (each fall is an overflow, a skipped
    step). A fall across a gap in the log (an excerpt that jumps ahead) is no evidence of either."""
    steps, vals, _ = timeline(s)
    out: list[Finding] = []
    falls: list[float] = []
    if len(vals) < 3 or s.width > 1:
        return out, falls
    near = 3 * step_spacing(steps)
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
            # a run of drops, each within 3 records of the previous one, with no increase between;
            # a drop across a gap in the log says the scale fell, not at which step (no skip counted)
            while j < n and vals[j] <= vals[j - 1] and j - last_drop <= 3:
                if vals[j] < vals[j - 1]:
                    decreases += 1
                    if steps[j] - steps[j - 1] <= near:
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
            i = j
            continue
        i += 1
    return out, falls


STARTUP_STEPS = 50  # the fp16 scaler searches its scale within about this many steps of the start
CLUSTER = 4  # this many skips close together after start-up: repeated overflows
PERSISTENT_RATE = 0.05  # or this share of all steps after start-up


@dataclass
class Skips:
    """Skipped steps as intervals: `count` skips happened in (lo, hi] (lo == hi: at that step)."""

    intervals: list[tuple[float, float, int]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    metric: str | None = None
    per_record: bool = False  # known only to the logged record (scale drops), not to the step

    @property
    def total(self) -> int:
        return sum(c for _, _, c in self.intervals)


def skip_intervals(counters: list[Series], scale_falls: list[float], overflow_steps: list[float],
                   scale_name: str | None) -> Skips:  # fmt: skip
    """The best evidence first: the trainer's own counters, else its overflow messages, else the
    drops of the loss scale (each drop is an overflow, and an overflow skips its step)."""
    out = Skips()
    for s in counters:
        st, vals, _ = timeline(s)
        if not vals:
            continue
        # DeepSpeed's `skipped=N` counts from the start; Megatron's "number of skipped iterations"
        # counts within each logging interval (so does any counter that ever goes down)
        per_interval = s.name.lower().startswith("number of") or any(
            b < a for a, b in itertools.pairwise(vals)
        )
        if per_interval:
            prev = [st[0], *st[:-1]]
            out.intervals += [(a, b, int(v)) for a, b, v in zip(prev, st, vals, strict=False) if v > 0]
        elif len(vals) > 1:
            if vals[0] > 0:
                out.intervals.append((st[0], st[0], int(vals[0])))
            for a, b, va, vb in zip(st, st[1:], vals, vals[1:], strict=False):
                if vb > va:
                    out.intervals.append((a, b, int(vb - va)))
        else:
            out.intervals += [(a, a, int(v)) for a, v in zip(st, vals, strict=False) if v > 0]
        if out.intervals and out.metric is None:
            out.metric = s.name
    if out.intervals:
        out.sources.append("skip counters")
        return out
    if overflow_steps:
        out.intervals = [(x, x, 1) for x in overflow_steps]
        out.sources.append("overflow messages")
        return out
    if scale_falls:
        out.intervals = [(x, x, 1) for x in sorted(set(scale_falls))]
        out.sources.append("loss-scale drops")
        out.metric = scale_name
        out.per_record = True
    return out


def detect_skipped(
    skips: Skips, spacing: float, first_step: float | None, last_step: float | None
) -> Finding | None:
    """Skipped steps, read the way fp16 dynamic loss scaling behaves: a burst at the start while
    the scaler searches its scale, and then an isolated overflow (or a pair, with hysteresis) each
    time it tries a larger scale, are normal. A warning needs skips that persist or recur after
    start-up: CLUSTER or more within a few steps, or PERSISTENT_RATE of the steps."""
    if not skips.intervals:
        return None
    ivs = sorted(skips.intervals)
    first = first_step if first_step is not None else ivs[0][0]
    last = last_step if last_step is not None else ivs[-1][1]
    span = max(last - first, spacing)
    gap = max(20.0, 3 * spacing)
    startup: list[tuple[float, float, int]] = []
    if ivs[0][0] <= first + max(STARTUP_STEPS, 0.02 * span):
        startup.append(ivs[0])
        for iv in ivs[1:]:
            if iv[0] - startup[-1][1] > gap:
                break
            startup.append(iv)
    late = ivs[len(startup) :]
    late_total = sum(c for _, _, c in late)
    startup_total = sum(c for _, _, c in startup)
    # skips known to the step cluster within a few steps; skips known only to the logged record
    # (scale drops) cluster when CLUSTER consecutive records show one
    window = CLUSTER * spacing if skips.per_record else max(10.0, 2 * spacing)
    cluster, cluster_at = _densest(late, window)
    late_span = max(last - (startup[-1][1] if startup else first), spacing)
    rate = late_total / (late_span / spacing if skips.per_record else late_span)
    persists = bool(startup) and (startup[-1][1] - first >= 0.5 * span or startup[-1][1] >= last - gap)
    warn = persists or cluster >= CLUSTER or (late_total >= CLUSTER and rate >= PERSISTENT_RATE)
    total = skips.total
    if warn:
        at = startup[0][0] if persists else (cluster_at if cluster >= CLUSTER else late[0][0])
        why = (
            "they never stop after start-up"
            if persists
            else f"{cluster} fall within {as_step(window)} steps from step {as_step(cluster_at)}"
            if cluster >= CLUSTER
            else f"{late_total} after start-up, {rate * 100:.1f}% of the {'records' if skips.per_record else 'steps'}"
        )
        msg = f"The trainer skipped steps ({total} skips; {why}): repeated fp16 overflows or NaN updates."
    else:
        at = ivs[0][0]
        parts = []
        if startup_total:
            parts.append(f"{startup_total} while the fp16 scaler searched its scale at the start")
        if late_total:
            parts.append(f"{late_total} isolated later ({rate * 100:.2f}% of the steps)")
        msg = f"The trainer skipped {total} steps ({'; '.join(parts)}): normal for fp16 dynamic loss scaling."
    return finding(
        "skipped_steps",
        "warning" if warn else "info",
        msg,
        step=at,
        metric=skips.metric,
        count=total,
        startup_skips=startup_total,
        later_skips=late_total,
        later_rate=r6(rate),
        largest_cluster=cluster,
        window_steps=as_step(window),
        steps=[as_step(hi) for _, hi, _ in ivs[:50]],
        sources=skips.sources,
    )


def _densest(ivs: list[tuple[float, float, int]], window: float) -> tuple[int, float]:
    """The most skips in intervals that all lie within `window` steps of each other (an interval
    wider than the window spreads its skips: only `window / width` of them count), and where the
    first group of CLUSTER or more begins (else where the densest group begins)."""
    best, at, first_at = 0, ivs[0][1] if ivs else 0.0, None

    def weight(iv: tuple[float, float, int]) -> float:
        lo, hi, c = iv
        return c * min(1.0, window / (hi - lo)) if hi - lo > window else float(c)

    j = 0
    acc = 0.0
    for iv in ivs:
        acc += weight(iv)
        while iv[1] - ivs[j][1] > window:
            acc -= weight(ivs[j])
            j += 1
        if acc >= CLUSTER and first_at is None:
            first_at = ivs[j][1]
        if acc > best:
            best, at = int(acc), ivs[j][1]
    return best, first_at if first_at is not None else at

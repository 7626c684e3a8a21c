"""The training loss: spikes that recover, divergence (sudden or slow), and the progress checks."""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainsleuth.tools.findings import Finding
from trainsleuth.tools.logs.detect.common import (
    MAX_EVENTS_PER_SERIES,
    as_step,
    finding,
    is_signed,
    r6,
    robust,
    rolling_median,
    step_spacing,
    timeline,
)
from trainsleuth.tools.logs.detect.progress import oscillation, plateau
from trainsleuth.tools.logs.detect.spikes import Spike, find_spikes
from trainsleuth.tools.logs.series import Series

VAL_REL = 1.0  # a validation loss spikes when it reaches twice its baseline


@dataclass
class LossAnalysis:
    findings: list[Finding]
    spikes: list[tuple[Series, list[float], Spike]]  # for linking with grad norms


def detect_loss(s: Series, trend: bool = True) -> LossAnalysis:
    """Spikes and divergence of a loss; with `trend`, also a slow divergence, a plateau and an
    oscillation (left out for a validation loss, whose trends are judged against the training
    loss: overfitting, a stall)."""
    steps, means, _ = timeline(s)
    mean_steps = steps
    vals = means
    # With buckets of several points, a spike lives in the bucket maximum (at its own step).
    if s.width > 1:
        steps, _, vals, _ = s.timeline(peaks=True)
    out: list[Finding] = []
    spikes_out: list[tuple[Series, list[float], Spike]] = []
    if is_signed(means):
        return LossAnalysis(out, spikes_out)
    # a validation loss is judged for jumps to twice its level (its first evaluations move a lot:
    # BatchNorm statistics, warmup), from 4 evaluations on
    spikes = (
        find_spikes(vals, "loss", steps, s.resolution)
        if trend
        else find_spikes(vals, "loss", steps, s.resolution, rel=VAL_REL, min_points=4)
    )
    diverged = False
    for sp in spikes[:MAX_EVENTS_PER_SERIES]:
        tail = len(vals) - sp.start
        tail_flag_frac = sp.flagged / max(1, sp.end - sp.start + 1)
        ev = dict(
            metric_role=s.role,
            baseline=r6(sp.base),
            threshold=r6(sp.threshold),
            robust_sigma=r6(sp.sigma),
            before=r6(vals[sp.start - 1]) if sp.start > 0 else None,
            before_step=as_step(steps[sp.start - 1]) if sp.start > 0 else None,
            peak=r6(vals[sp.peak]),
            peak_step=as_step(steps[sp.peak]),
            ratio_to_baseline=r6(vals[sp.peak] / sp.base) if sp.base > 0 else None,
            step_source="record position" if s.step_from_position else None,
        )
        if sp.recovered is None and sp.end == len(vals) - 1 and tail >= 4 and tail_flag_frac >= 0.75:
            diverged = True
            # the rise starts at the first record after the last one at the pre-change level
            onset = sp.onset
            calm = sp.base + max(2 * sp.sigma, 0.1 * abs(sp.base))
            spacing = step_spacing(steps)
            while (
                onset - 1 >= 0 and vals[onset - 1] > calm and steps[onset] - steps[onset - 1] <= 3 * spacing
            ):
                onset -= 1
            sp.onset = onset
            ev.update(
                before=r6(vals[onset - 1]) if onset > 0 else None,
                before_step=as_step(steps[onset - 1]) if onset > 0 else None,
                confirmed_step=as_step(steps[sp.start]),
            )
            out.append(
                finding(
                    "divergence",
                    "error",
                    f"{s.name} jumps from about {r6(sp.base)} to {r6(vals[sp.start])} at step "
                    f"{as_step(steps[sp.start])}"
                    + (f" (rising from step {as_step(steps[onset])})" if onset < sp.start else "")
                    + f" and stays high to the end of the log ({len(vals) - onset} records, last "
                    f"{r6(vals[-1])}): a divergence, not a transient spike.",
                    step=steps[onset],
                    metric=s.name,
                    last=r6(vals[-1]),
                    last_step=as_step(steps[-1]),
                    records_elevated=len(vals) - onset,
                    **ev,
                )
            )
            spikes_out.append((s, steps, sp))
            continue
        rec_step = steps[sp.recovered] if sp.recovered is not None else None
        msg = (
            f"{s.name} spikes from about {r6(sp.base)} to {r6(vals[sp.peak])} at step {as_step(steps[sp.peak])}"
            + (
                f" and recovers by step {as_step(rec_step)}."
                if rec_step is not None
                else "; the log ends before it recovers."
            )
        )
        if sp.onset < sp.start:
            msg += f" It starts rising at step {as_step(steps[sp.onset])}."
            ev.update(
                before=r6(vals[sp.onset - 1]) if sp.onset > 0 else None,
                before_step=as_step(steps[sp.onset - 1]) if sp.onset > 0 else None,
                confirmed_step=as_step(steps[sp.start]),
            )
        out.append(
            finding(
                "loss_spike",
                "warning",
                msg,
                step=steps[sp.onset],
                metric=s.name,
                recovered_step=as_step(rec_step),
                recovered=rec_step is not None,
                records=sp.end - sp.onset + 1,
                **ev,
            )
        )
        spikes_out.append((s, steps, sp))
    if len(spikes) > MAX_EVENTS_PER_SERIES:
        out.append(
            finding(
                "loss_spike",
                "warning",
                f"{s.name}: {len(spikes) - MAX_EVENTS_PER_SERIES} more spikes not listed.",
                metric=s.name,
                more=len(spikes) - MAX_EVENTS_PER_SERIES,
            )
        )
    if not trend:
        return LossAnalysis(out, spikes_out)
    if not diverged:
        f = _slow_divergence(s, mean_steps, means)
        if f:
            out.append(f)
    f = None if any(x.code == "divergence" for x in out) else plateau(s, mean_steps, means)
    if f:  # a run that learnt and then diverged is not a plateau
        out.append(f)
    f = oscillation(s, mean_steps, means)
    if f:
        out.append(f)
    return LossAnalysis(out, spikes_out)


def _slow_divergence(s: Series, steps: list[float], vals: list[float]) -> Finding | None:
    n = len(vals)
    if n < 30:
        return None
    w = max(5, n // 10)
    rm = rolling_median(vals, w)
    _, noise = robust([vals[i] - rm[i] for i in range(w, n)] or [0.0])
    start = w - 1
    lo_i = min(range(start, n), key=lambda i: rm[i])
    lo = rm[lo_i]
    final = rm[-1]
    rise = final - lo
    need = max(0.25 * abs(lo), 6 * noise / math.sqrt(w))
    if rise <= need or lo_i > n - w:
        return None
    tail = vals[-w:]
    if sum(v > lo + need / 2 for v in tail) < 0.8 * len(tail):
        return None
    cross = next((i for i in range(lo_i, n) if rm[i] > lo + need / 2), n - 1)
    onset = _hinge_onset(vals, max(0, lo_i - w), cross, w)
    return finding(
        "divergence",
        "error",
        f"{s.name} rises steadily from step {as_step(steps[onset])}, from a low of {r6(lo)} (trailing median at "
        f"step {as_step(steps[lo_i])}) to {r6(final)} at the end of the log, and does not come back down.",
        step=steps[onset],
        metric=s.name,
        confirmed_step=as_step(steps[cross]),
        low=r6(lo),
        low_step=as_step(steps[lo_i]),
        final_median=r6(final),
        window_points=w,
        rise=r6(rise),
        threshold=r6(need),
    )


def _hinge_onset(vals: list[float], first: int, last: int, w: int) -> int:
    """Where a level turns into a steady rise: the knee c in [first, last] of the least-squares
    fit y = a + b * max(0, i - c) (b > 0) over the records from `first - w` to `last + w`."""
    lo, hi = max(0, first - w), min(len(vals) - 1, last + w)
    ys = vals[lo : hi + 1]
    m = len(ys)
    if m < 4 or last <= first:
        return last
    # prefix sums over the window (positions relative to lo)
    py = [0.0]
    pjy = [0.0]
    for j, y in enumerate(ys):
        py.append(py[-1] + y)
        pjy.append(pjy[-1] + j * y)
    sy = py[-1]
    syy_c = sum((y - sy / m) ** 2 for y in ys)
    best, best_sse = last, math.inf
    for c in range(first, last + 1):
        cj = c - lo
        k = m - 1 - cj  # x runs 0..k over the positions cj..m-1
        if k < 1:
            continue
        sx = k * (k + 1) / 2
        sxx = k * (k + 1) * (2 * k + 1) / 6
        tail_y = sy - py[cj]
        sxy = (pjy[m] - pjy[cj]) - cj * tail_y
        vxx = sxx - sx * sx / m
        vxy = sxy - sx * sy / m
        if vxx <= 0 or vxy <= 0:  # no rise after c
            continue
        sse = syy_c - vxy * vxy / vxx
        if sse < best_sse:
            best, best_sse = c, sse
    return best

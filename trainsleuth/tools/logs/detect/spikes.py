"""Upward excursions above a robust local baseline (loss spikes, grad-norm spikes)."""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from trainsleuth.tools.logs.detect.common import MIN_HISTORY, WINDOW, step_spacing

BLOWUP = 1.5  # in the first records, a loss 50 % above its lowest so far is blowing up
LOSS_K, LOSS_REL = 6.0, 0.35  # loss spike: above median + max(6 sigma, 35 %)
GRAD_K, GRAD_FACTOR = 8.0, 4.0  # grad-norm spike: above max(4x median, median + 8 sigma)


@dataclass
class Spike:
    start: int  # index of the first anomalous point
    peak: int
    end: int  # last anomalous index
    recovered: int | None  # first index back to normal (None: the series ends first)
    base: float
    sigma: float
    threshold: float
    onset: int = -1  # grad norm: where the rise began (may precede `start`)
    flagged: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def shorth(values: list[float]) -> tuple[float, float]:
    """Location and spread of the densest half of the values (robust to a long excursion)."""
    v = sorted(values)
    n = len(v)
    h = max(3, (n + 1) // 2)
    best = min(range(n - h + 1), key=lambda i: v[i + h - 1] - v[i])
    part = v[best : best + h]
    return median(part), (part[-1] - part[0]) / 1.349


def diff_sigma(values: list[float]) -> float:
    """Noise level from first differences: insensitive to slow trends (loss going down)."""
    if len(values) < 3:
        return 0.0
    return 1.4826 * median([abs(b - a) for a, b in itertools.pairwise(values)]) / math.sqrt(2)


def _detrended(values: list[float]) -> list[float]:
    """`values` less their straight-line trend (the slope between the means of the two halves; the
    MAD taken afterwards is what must be robust)."""
    n = len(values)
    if n < 6:
        return values
    h = n // 2
    slope = (sum(values[n - h :]) - sum(values[:h])) / (h * (n - h))
    return [v - slope * i for i, v in enumerate(values)]


def find_spikes(vals: list[float], kind: str, steps: list[float] | None = None, resolution: float = 0.0,
                rel: float = LOSS_REL, min_points: int = 6) -> list[Spike]:  # fmt: skip
    """Upward excursions above a robust trailing baseline, grouped into events.

    `resolution`: the rounding of the printed values (1e-4 for a loss printed with 4 decimals). A
    rise of fewer than 10 rounding steps is never a spike: near the resolution, rounding alone
    makes values jump by large ratios (0.0001 -> 0.0003).

    The baseline is local in steps: only accepted points within WINDOW typical step spacings
    count, and the noise level comes from differences between neighbouring accepted points,
    so excerpts pasted with large step gaps do not inflate it."""
    n = len(vals)
    if n < min_points:
        return []
    if steps is None:
        steps = [float(i) for i in range(n)]
    spacing = step_spacing(steps)
    near = WINDOW * spacing
    glob_med, glob_sig = shorth(vals)
    acc_s: list[float] = []
    acc_v: list[float] = []
    # acc_d[j]: |acc_v[j] - acc_v[j - 1]| when the two are neighbours in steps, else None
    acc_d: list[float | None] = []
    close = 3 * spacing

    def accept(st: float, v: float) -> None:
        acc_d.append(abs(v - acc_v[-1]) if acc_v and st - acc_s[-1] <= close else None)
        acc_s.append(st)
        acc_v.append(v)

    flags = [False] * n
    info: list[tuple[float, float, float] | None] = [None] * n
    warm = n >= 50
    last_sig: float | None = None
    for i, v in enumerate(vals):
        st = steps[i]
        if warm and len(acc_v) < MIN_HISTORY:
            # not enough history yet (warmup): no baseline, except that a loss that jumps to well
            # above everything before it in the first records, and stays there on the next one, is
            # blowing up, not warming up (one high record among low ones is an oscillation)
            limit = BLOWUP * min(acc_v) if acc_v else math.inf
            if kind == "loss" and v > vals[i - 1] and v > limit and (i + 1 == n or vals[i + 1] > limit):
                flags[i] = True
                info[i] = (min(acc_v), 0.0, BLOWUP * min(acc_v))
            else:
                accept(st, v)
            continue
        # the accepted points within `near` steps, at most 2 * WINDOW of them (steps are sorted)
        k = bisect_left(acc_s, st - near, max(0, len(acc_v) - 2 * WINDOW))
        if len(acc_v) - k >= 5 and (i == 0 or not flags[i - 1]) and (warm or len(acc_v) - k >= 2 * WINDOW):
            # the usual case, settled: a value under the relative floor of the baseline is no spike
            # whatever the noise (every threshold below is at least that floor), so the noise level
            # need not be worked out for it
            base = median(acc_v[-5:])
            if v <= (base * GRAD_FACTOR if kind == "grad_norm" else base + rel * abs(base)):
                accept(st, v)
                continue
        local = acc_v[k:]
        diffs = [d for d in acc_d[max(1, k) :] if d is not None]
        few = len(diffs) < 5  # too few neighbouring differences to trust a noise level
        if len(diffs) >= (3 if warm else 1):
            sig = 1.4826 * median(diffs) / math.sqrt(2)
        else:
            sig = last_sig if last_sig is not None else glob_sig
        if len(local) >= 5:
            base = median(local[-5:])
            recent = _detrended(local[-WINDOW:])  # a falling (or rising) loss is no noise
            med = median(recent)
            sig = max(sig, 1.4826 * median([abs(x - med) for x in recent]))
            last_sig = sig
        elif len(local) >= 2:
            base = median(local[-5:])
            last_sig = sig
        elif len(acc_v) >= 2 and last_sig is not None:
            # nothing accepted nearby (a long excursion or a gap): keep the last known baseline
            base, sig = median(acc_v[-5:]), last_sig
        elif acc_v and not warm:
            base = acc_v[-1]
        else:
            base, sig = glob_med, glob_sig
        if kind == "grad_norm":
            if base <= 0:
                accept(st, v)
                continue
            thr = max(base * GRAD_FACTOR, base + GRAD_K * sig, base + 10 * resolution)
        else:
            # with few differences to go by (a short excerpt, a restart), a ramp inside the history
            # inflates the noise estimate: then the relative floor alone decides
            noise = min(LOSS_K * sig, rel * abs(base)) if few and not warm else LOSS_K * sig
            thr = base + max(noise, rel * abs(base), 10 * resolution, 1e-8)
        # A spike is a jump: the value rose from the record before it (or continues an event),
        # so a loss that simply starts high and falls is never flagged.
        if v > thr and i > 0 and (v > vals[i - 1] or flags[i - 1]):
            flags[i] = True
            info[i] = (base, sig, thr)
        else:
            accept(st, v)
    spikes: list[Spike] = []
    i = 0
    while i < n:
        if not flags[i]:
            i += 1
            continue
        start = i
        base, sig, thr = info[i]  # type: ignore[misc]
        j = i
        last_flag = i
        normal_run = 0
        back = (
            max(2.0 * base, base + 3 * sig) if kind == "grad_norm" else base + max(2 * sig, 0.1 * abs(base))
        )
        while j + 1 < n:
            j += 1
            if flags[j]:
                last_flag = j
                normal_run = 0
            else:
                normal_run += 1
                if normal_run >= 2 or vals[j] <= back:  # two normal records, or one back at the baseline
                    break
        peak = max(range(start, last_flag + 1), key=lambda k: vals[k])
        if kind == "grad_norm":
            calm = max(2.0 * base, base + 3 * sig)
        else:
            calm = base + max(2 * sig, 0.1 * abs(base))
        recovered = next((k for k in range(peak + 1, n) if vals[k] <= calm), None)
        if recovered is not None and recovered > last_flag + 1 and any(flags[last_flag + 1 : recovered]):
            recovered = None
        sp = Spike(start, peak, last_flag, recovered, base, sig, thr)
        sp.flagged = sum(flags[start : last_flag + 1])
        # Onset: walk back from the first flagged point over the records that were already
        # rising above the calm level (a ramp that crossed the threshold only later).
        onset = start
        rise_floor = 2 * base if kind == "grad_norm" else calm
        while (
            onset - 1 >= 0
            and vals[onset - 1] < vals[onset]
            and vals[onset - 1] > rise_floor
            and steps[onset] - steps[onset - 1] <= 3 * spacing  # not back across a gap
        ):
            onset -= 1
        sp.onset = onset
        spikes.append(sp)
        i = last_flag + 1
    return spikes

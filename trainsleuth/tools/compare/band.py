"""The noise band of the good run(s) and the first step where the other run leaves it.

What a band is here, so every verdict can say what it measured and what it compared with:
- the good run's trend is a rolling median of its values;
- its noise is its own step-to-step variation: a robust (MAD) spread of the first differences
  around their local median, divided by sqrt(2), estimated locally along the run;
- runs with another seed differ mostly in pace (one is a little ahead or behind), which a single
  run's step-to-step noise cannot show, so with one good run the band also spans what the good
  trend reaches within +-PACE of the step; with several good runs their spread gives that width;
- metrics with no step-to-step noise (a learning-rate schedule, a batch size) are compared
  exactly, up to the printed precision of both logs.

A metric leaves the band when SUSTAIN consecutive points of the other run lie outside it on the
same side (fewer points need fewer, with a wider band); a NaN/Inf leaves it at once. Runs that
agree exactly at their common steps (same seed, data and code) and then part are reported with the
step where they part, whatever the band says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

K_SIGMA = 3.0
PACE_ONE = 0.4
PACE_SEVERAL = 0.10
SUSTAIN = 3
DETERMINISTIC_REL = 1e-3
INITIAL_SHARE = 0.05
MIN_POINTS = 3  # fewer points in common are not judged  # an offset confined to this first share of the points is read as initialisation
# Metrics set by configuration rather than by training: compared exactly when they are smooth.
EXACT_ROLES = ("lr", "batch_size")


@dataclass
class Curve:
    """One metric of one run: finite points in step order, plus where it first went NaN/Inf."""

    name: str
    role: str
    steps: list[float]
    values: list[float]
    points_in_log: int = 0
    first_nonfinite_step: float | None = None
    positional: bool = False


@dataclass
class Reference:
    """A good curve prepared for comparison (numpy arrays)."""

    curve: Curve
    steps: Any
    values: Any
    trend: Any
    sigma: Any
    precision: Precision
    deterministic: bool
    interval: float


@dataclass
class MetricResult:
    name: str
    good_name: str
    role: str
    status: str  # diverged | within_noise | identical | not_compared
    compared: int = 0
    outside: int = 0
    first_step: float | None = None
    direction: str | None = None  # higher | lower | nonfinite
    good_value: float | None = None
    bad_value: float | None = None
    band: tuple[float, float] | None = None
    deterministic: bool = False
    identical_until: float | None = None
    parts_at: float | None = None
    overlap: tuple[float, float] | None = None
    note: str | None = None
    # for the plot: the band along the other run's steps
    band_steps: list[float] = field(default_factory=list)
    band_low: list[float] = field(default_factory=list)
    band_high: list[float] = field(default_factory=list)


def _np() -> Any:
    import numpy as np

    return np


def _odd(n: float, lo: int, hi: int) -> int:
    w = int(max(lo, min(hi, n)))
    return w if w % 2 else w + 1


def rolling_median(values: Any, window: int) -> Any:
    """Centred rolling median; the window shrinks at the edges (NaN padding, nanmedian)."""
    np = _np()
    if window <= 1 or len(values) < 3:
        return values.astype(float).copy()
    half = window // 2
    padded = np.concatenate([np.full(half, np.nan), values.astype(float), np.full(half, np.nan)])
    view = np.lib.stride_tricks.sliding_window_view(padded, window)
    return np.nanmedian(view, axis=1)


@dataclass(frozen=True)
class Precision:
    """How precisely a metric was printed: `absolute` for fixed decimals (`%.4f` -> 5e-5),
    `significant` for significant digits (`%.3e` -> 5e-4 of the value's power of ten)."""

    absolute: float = 0.0
    significant: float = 0.0

    def at(self, values: Any) -> Any:
        np = _np()
        v = np.abs(np.asarray(values, dtype=float))
        power = 10.0 ** np.floor(np.log10(np.where(v > 0, v, 1.0)))
        return np.maximum(self.absolute, self.significant * np.where(v > 0, power, 0.0))


def precision(values: Any) -> Precision:
    """Infer the printed precision from the digits the values need. Most values need every printed
    digit (a few happen to end in zeros), so the finest tenth decides. Few distinct values tell
    nothing about the format: they count as exact."""
    np = _np()
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v != 0)]
    if len(np.unique(v[:2000])) <= 3:
        return Precision()
    v = v[:: max(1, len(v) // 400)]
    exp = np.floor(np.log10(np.abs(v)))
    mant = v / 10.0**exp
    digits = np.full(len(v), 16.0)
    for d in range(1, 16):
        hit = (digits == 16) & np.isclose(np.round(mant, d - 1), mant, rtol=0, atol=1e-12)
        digits[hit] = d
    res = 0.5 * 10.0 ** (exp - (digits - 1))
    res[digits == 16] = 0.0
    sig = 0.5 * 10.0 ** (-(digits - 1))
    sig[digits == 16] = 0.0
    return Precision(float(np.quantile(res, 0.1)), float(np.quantile(sig, 0.1)))


def prepare(curve: Curve) -> Reference | None:
    np = _np()
    steps = np.asarray(curve.steps, dtype=float)
    values = np.asarray(curve.values, dtype=float)
    if len(steps) < 2:
        return None
    n = len(values)
    prec = precision(values)
    res = float(np.median(prec.at(values)))
    scale = float(np.median(np.abs(values))) or 1.0
    diffs = np.diff(values)
    local = rolling_median(diffs, _odd(n / 30, 3 if n >= 9 else 1, 51))
    dev = np.abs(diffs - local)
    spread = rolling_median(dev, _odd(n / 5, 9, 501)) * 1.4826 / math.sqrt(2)
    # one sigma per point: the differences on either side
    sigma = np.empty(n)
    sigma[0] = spread[0]
    sigma[-1] = spread[-1]
    if n > 2:
        sigma[1:-1] = np.maximum(spread[:-1], spread[1:])
    overall = float(np.median(dev)) * 1.4826 / math.sqrt(2) if len(dev) else 0.0
    deterministic = curve.role in EXACT_ROLES and overall <= max(2 * res, 1e-6 * scale)
    trend = values.copy() if deterministic else rolling_median(values, _odd(n / 30, 3 if n >= 9 else 1, 51))
    if not deterministic:
        # a quiet stretch never makes the band narrower than half the run's typical noise, and a
        # sparsely logged metric is known only to about half its change between two records
        moves = float(np.median(np.abs(np.diff(trend)))) if n > 1 else 0.0
        sigma = np.maximum(sigma, max(0.5 * overall, 0.5 * moves))
    interval = float(np.median(np.diff(steps))) if n > 1 else 1.0
    return Reference(curve, steps, values, trend, sigma, prec, deterministic, interval)


def _end_slopes(ref: Reference) -> tuple[float, float]:
    """Slopes of the trend over its first and last tenth (least squares)."""
    np = _np()
    n = len(ref.steps)
    k = max(3, n // 10)
    if n < 3:
        return 0.0, 0.0
    head = np.polyfit(ref.steps[:k], ref.trend[:k], 1)[0]
    tail = np.polyfit(ref.steps[-k:], ref.trend[-k:], 1)[0]
    return float(head), float(tail)


def _extended(ref: Reference, x: Any) -> Any:
    """The trend at x, continued along its end slopes beyond the good run's first and last steps
    (what it would have reached a little earlier or later)."""
    np = _np()
    y = np.interp(x, ref.steps, ref.trend)
    head, tail = _end_slopes(ref)
    before = x < ref.steps[0]
    after = x > ref.steps[-1]
    y = np.where(before, ref.trend[0] + head * (x - ref.steps[0]), y)
    return np.where(after, ref.trend[-1] + tail * (x - ref.steps[-1]), y)


def _window_extremes(ref: Reference, lo: Any, hi: Any) -> tuple[Any, Any]:
    """Minimum and maximum of the trend over [lo, hi] for every pair (interpolated at the ends)."""
    np = _np()
    steps, trend = ref.steps, ref.trend
    a = _extended(ref, lo)
    b = _extended(ref, hi)
    mn = np.minimum(a, b)
    mx = np.maximum(a, b)
    i0 = np.searchsorted(steps, lo, side="left")
    i1 = np.searchsorted(steps, hi, side="right")
    inner = i1 > i0
    if inner.any():
        # min/max over [i0, i1) with reduceat on interleaved indices (a sentinel keeps them < n+1)
        padded = np.concatenate([trend, [trend[-1]]])
        idx = np.empty(2 * int(inner.sum()), dtype=np.intp)
        idx[0::2] = i0[inner]
        idx[1::2] = i1[inner]
        mins = np.minimum.reduceat(padded, idx)[0::2]
        maxs = np.maximum.reduceat(padded, idx)[0::2]
        mn[inner] = np.minimum(mn[inner], mins)
        mx[inner] = np.maximum(mx[inner], maxs)
    return mn, mx


# Expected range of k normal samples in standard deviations (control-chart constant d2): with k good
# runs, their spread divided by d2(k) estimates the run-to-run standard deviation.
D2 = {2: 1.128, 3: 1.693, 4: 2.059, 5: 2.326, 6: 2.534, 7: 2.704, 8: 2.847, 9: 2.970, 10: 3.078, 11: 3.173}


def band_at(refs: list[Reference], steps: Any, bad_precision: Precision) -> tuple[Any, Any, Any, Any]:
    """(low, high, centre, sigma) of the band at `steps` (inside the good steps' range).

    One good run: its trend over +-PACE_ONE of the step, +- K step-to-step sigmas. Several: the
    mean of their trends (over +-PACE_SEVERAL) +- K run-to-run sigmas (their spread / d2) and
    K step-to-step sigmas."""
    np = _np()
    deterministic = all(r.deterministic for r in refs)
    pace = PACE_ONE if len(refs) == 1 else PACE_SEVERAL
    lows, highs, centres = [], [], []
    sig = np.zeros(len(steps))
    for ref in refs:
        # configuration metrics are compared step for step; the rest may be a little ahead or behind
        reach = np.zeros(len(steps)) if deterministic else np.maximum(pace * np.abs(steps), ref.interval)
        mn, mx = _window_extremes(ref, steps - reach, steps + reach)
        centre = np.interp(steps, ref.steps, ref.trend)
        if deterministic:
            # between two logged steps the schedule is only known up to its change over the gap
            nxt = np.interp(steps + ref.interval, ref.steps, ref.trend)
            prv = np.interp(steps - ref.interval, ref.steps, ref.trend)
            on_step = np.isin(steps, ref.steps)
            gap = np.where(on_step, 0.0, 0.5 * np.maximum(np.abs(nxt - centre), np.abs(prv - centre)))
            mn, mx = mn - gap, mx + gap
        lows.append(mn)
        highs.append(mx)
        sig = np.maximum(sig, np.interp(steps, ref.steps, ref.sigma))
        centres.append(centre)
    centre = np.mean(centres, axis=0)
    if len(refs) == 1 or deterministic:
        low, high, spread = np.min(lows, axis=0), np.max(highs, axis=0), 0.0
    else:
        low, high = np.mean(lows, axis=0), np.mean(highs, axis=0)
        spread = (np.max(centres, axis=0) - np.min(centres, axis=0)) / D2.get(len(refs), 3.2)
    tol = np.max([r.precision.at(centre) for r in refs], axis=0) + bad_precision.at(centre)
    if deterministic:
        tol = tol + DETERMINISTIC_REL * np.abs(centre)
    width = K_SIGMA * (sig + spread) + tol
    return low - width, high + width, centre, sig


def _identical_prefix(
    ref: Reference, bad_steps: Any, bad_values: Any, bad_prec: Precision
) -> tuple[int, int, Any]:
    """At the steps both runs logged: how many agree exactly (up to print precision) from the
    start, how many common steps there are, and the common steps."""
    np = _np()
    common, gi, bi = np.intersect1d(ref.steps, bad_steps, return_indices=True)
    if not len(common):
        return 0, 0, common
    g = ref.values[gi]
    b = bad_values[bi]
    # float32 storage (TensorBoard, wandb) rounds to about 6e-8 of the value
    same = np.abs(g - b) <= ref.precision.at(g) + bad_prec.at(g) + 2e-7 * np.abs(g)
    if same.all():
        return len(common), len(common), common
    return int(np.argmin(same)), len(common), common


def compare_curve(goods: list[Curve], bad: Curve) -> MetricResult:
    np = _np()
    result = MetricResult(name=bad.name, good_name=goods[0].name, role=bad.role, status="not_compared")
    refs = [r for r in (prepare(g) for g in goods) if r is not None]
    if not refs:
        result.note = "the good run has fewer than 2 finite points of this metric"
        return result
    result.deterministic = all(r.deterministic for r in refs)
    b_steps = np.asarray(bad.steps, dtype=float)
    b_vals = np.asarray(bad.values, dtype=float)
    lo_step = max(float(r.steps[0]) for r in refs)
    hi_step = min(float(r.steps[-1]) for r in refs)
    nonfinite = bad.first_nonfinite_step
    good_nonfinite = [g.first_nonfinite_step for g in goods if g.first_nonfinite_step is not None]
    if nonfinite is not None and good_nonfinite and min(good_nonfinite) <= nonfinite:
        nonfinite = None  # the good run went NaN/Inf first: not a difference of the other run
    inside = (b_steps >= lo_step) & (b_steps <= hi_step)
    steps, vals = b_steps[inside], b_vals[inside]
    result.compared = len(steps)
    if len(steps):
        result.overlap = (float(steps[0]), float(steps[-1]))
    bad_res = precision(b_vals)
    # identical runs that part: the same seed, data and code until something changed
    same, common_n, common = _identical_prefix(refs[0], b_steps, b_vals, bad_res)
    if common_n >= 3 and same == common_n:
        result.identical_until = float(common[-1])
    elif same >= 3:
        result.identical_until = float(common[same - 1])
        result.parts_at = float(common[same])
    if nonfinite is not None and lo_step <= nonfinite <= hi_step:
        result.status = "diverged"
        result.first_step = float(nonfinite)
        result.direction = "nonfinite"
        result.good_value = float(np.interp(nonfinite, refs[0].steps, refs[0].trend))
        result.bad_value = math.nan
    if len(steps) == 0:
        if result.status != "diverged":
            result.note = (
                f"no overlap: the good run logs steps {lo_step:g}..{hi_step:g}, this one "
                f"{b_steps[0]:g}..{b_steps[-1]:g}"
                if len(b_steps)
                else "no finite points in this run"
            )
        return result
    if len(steps) < MIN_POINTS and result.status != "diverged":
        result.note = f"only {len(steps)} point(s) where both runs logged it: too few to judge"
        return result
    low, high, centre, _ = band_at(refs, steps, bad_res)
    n = len(steps)
    k_scale = 1.0 if n >= 6 else 2.0
    sustain = SUSTAIN if n >= 20 else (2 if n >= 6 else 1)
    if k_scale != 1.0:
        width = (high - low) / 2
        mid = (high + low) / 2
        low, high = mid - k_scale * width, mid + k_scale * width
    above = vals > high
    below = vals < low
    result.outside = int(above.sum() + below.sum())
    result.band_steps = steps.tolist()
    result.band_low = low.tolist()
    result.band_high = high.tolist()
    first = _first_sustained(above, below, sustain)
    limit = max(sustain, math.ceil(INITIAL_SHARE * n))
    if first is not None and first < limit and not result.deterministic:
        # an offset confined to the first few points, inside the band afterwards: initialisation noise
        back = _first_run(~(above[first:] | below[first:]), 1)
        if back is not None and first + back <= limit:
            end = first + back
            later = _first_sustained(above[end:], below[end:], sustain)
            result.note = (
                f"differs only in its first {end} point(s) (up to step {steps[end - 1]:g}), read as "
                "initialisation noise"
            )
            first = None if later is None else end + later
    if first is not None and (result.first_step is None or steps[first] < result.first_step):
        result.status = "diverged"
        result.first_step = float(steps[first])
        result.direction = "higher" if above[first] else "lower"
        result.good_value = float(centre[first])
        result.bad_value = float(vals[first])
        result.band = (float(low[first]), float(high[first]))
    if result.status != "diverged":
        if result.identical_until is not None and result.parts_at is None:
            result.status = "identical"
            if common_n < n:
                result.note = f"identical at all {common_n} steps both runs logged"
        else:
            result.status = "within_noise"
    return result


def step_shift(good: Curve, bad: Curve) -> float | None:
    """The step offset under which two curves agree exactly (one log counts epochs from 0, the
    other from 1), when they do not agree as given; None otherwise."""
    np = _np()
    ref = prepare(good)
    if ref is None or len(bad.steps) < 3:
        return None
    b_steps = np.asarray(bad.steps, dtype=float)
    b_vals = np.asarray(bad.values, dtype=float)
    prec = precision(b_vals)
    same, n, _ = _identical_prefix(ref, b_steps, b_vals, prec)
    if n >= 3 and same == n:
        return None
    gaps = np.diff(b_steps)
    interval = float(np.median(gaps)) if len(gaps) else 1.0
    for k in (1, -1, 2, -2):
        shift = k * interval
        same, n, _ = _identical_prefix(ref, b_steps - shift, b_vals, prec)
        if n >= 3 and same == n and n >= 0.5 * min(len(b_steps), len(ref.steps)):
            return shift
    return None


def _first_sustained(above: Any, below: Any, sustain: int) -> int | None:
    """Index of the first point that starts `sustain` consecutive points outside on one side."""
    found = [i for i in (_first_run(above, sustain), _first_run(below, sustain)) if i is not None]
    return min(found) if found else None


def _first_run(side: Any, sustain: int) -> int | None:
    run = 0
    for i, out in enumerate(side.tolist()):
        run = run + 1 if out else 0
        if run >= sustain:
            return i - sustain + 1
    return None

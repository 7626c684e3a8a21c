"""Anomaly detectors over metric series. Conservative by design: a healthy run (noisy, with
warmup, schedule changes, periodic evaluation, noisy RL rewards) yields no warning or error.

Robust statistics throughout: baselines are medians of trailing *accepted* points (points not
themselves anomalous), spread is the MAD scaled to a standard deviation, and every threshold
also has a relative floor so quantised or near-constant series do not trip on tiny changes.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from trainsleuth.tools.findings import Finding
from trainsleuth.tools.logs.series import Series

try:  # the knowledge area fills this mapping; an empty one is fine
    from trainsleuth.knowledge.links import failure_modes_for
except ImportError:  # pragma: no cover

    def failure_modes_for(code: str) -> list[str]:
        return []


WINDOW = 20  # trailing accepted points that form a baseline
MIN_HISTORY = 5  # fewer trailing points than this: use the whole series' robust statistics
MAX_EVENTS_PER_SERIES = 20
LOSS_K, LOSS_REL = 6.0, 0.35  # loss spike: above median + max(6 sigma, 35 %)
GRAD_K, GRAD_FACTOR = 8.0, 4.0  # grad-norm spike: above max(4x median, median + 8 sigma)


def _num(x: float | None) -> int | float | None:
    if x is None:
        return None
    if isinstance(x, float) and math.isfinite(x) and x.is_integer():
        return int(x)
    return round(x, 3) if math.isfinite(x) else x


def _r(x: float) -> float:
    if not math.isfinite(x) or x == 0 or (float(x).is_integer() and abs(x) < 1e15):
        return x
    return float(f"{x:.6g}")


def robust(values: list[float]) -> tuple[float, float]:
    med = median(values)
    mad = median([abs(v - med) for v in values])
    return med, 1.4826 * mad


def finding(
    code: str,
    severity: str,
    message: str,
    *,
    step: float | None = None,
    metric: str | None = None,
    **evidence: Any,
) -> Finding:
    return Finding(
        code=code,
        severity=severity,
        message=message,
        step=int(step) if step is not None and math.isfinite(step) else None,
        metric=metric,
        evidence={k: v for k, v in evidence.items() if v is not None},
        failure_modes=failure_modes_for(code),
    )


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


def find_spikes(vals: list[float], kind: str, steps: list[float] | None = None) -> list[Spike]:
    """Upward excursions above a robust trailing baseline, grouped into events.

    The baseline is local in steps: only accepted points within WINDOW typical step spacings
    count, and the noise level comes from differences between neighbouring accepted points,
    so excerpts pasted with large step gaps do not inflate it."""
    n = len(vals)
    if n < 6:
        return []
    if steps is None:
        steps = [float(i) for i in range(n)]
    spacing = _spacing(steps)
    near = WINDOW * spacing
    glob_med, glob_sig = shorth(vals)
    acc_s: list[float] = []
    acc_v: list[float] = []
    flags = [False] * n
    info: list[tuple[float, float, float] | None] = [None] * n
    warm = n >= 50
    last_sig: float | None = None
    for i, v in enumerate(vals):
        st = steps[i]
        if warm and len(acc_v) < MIN_HISTORY:
            acc_s.append(st)
            acc_v.append(v)  # not enough history yet (warmup): no baseline
            continue
        k = len(acc_v)
        while k > 0 and k > len(acc_v) - 2 * WINDOW and st - acc_s[k - 1] <= near:
            k -= 1
        local = acc_v[k:]
        diffs = [
            abs(acc_v[j] - acc_v[j - 1])
            for j in range(max(1, k), len(acc_v))
            if acc_s[j] - acc_s[j - 1] <= 3 * spacing
        ]
        if len(diffs) >= (3 if warm else 1):
            sig = 1.4826 * median(diffs) / math.sqrt(2)
        else:
            sig = last_sig if last_sig is not None else glob_sig
        if len(local) >= 5:
            base = median(local[-5:])
            recent = local[-WINDOW:]
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
                acc_s.append(st)
                acc_v.append(v)
                continue
            thr = max(base * GRAD_FACTOR, base + GRAD_K * sig)
        else:
            thr = base + max(LOSS_K * sig, LOSS_REL * abs(base), 1e-8)
        # A spike is a jump: the value rose from the record before it (or continues an event),
        # so a loss that simply starts high and falls is never flagged.
        if v > thr and i > 0 and (v > vals[i - 1] or flags[i - 1]):
            flags[i] = True
            info[i] = (base, sig, thr)
        else:
            acc_s.append(st)
            acc_v.append(v)
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
        while j + 1 < n:
            j += 1
            if flags[j]:
                last_flag = j
                normal_run = 0
            else:
                normal_run += 1
                if normal_run >= 2:
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


def _timeline(s: Series) -> tuple[list[float], list[float], list[float]]:
    steps, means, maxes, _ = s.timeline()
    return steps, means, maxes


def _is_signed(vals: list[float]) -> bool:
    return bool(vals) and min(vals) < 0


# ---------------------------------------------------------------------------- detectors


def detect_nonfinite(series: list[Series]) -> list[Finding]:
    out = []
    for s in series:
        if not s.nonfinite:
            continue
        if s.role in ("loss", "val_loss", "loss_component", "perplexity"):
            sev = "error"
        elif s.role in ("grad_norm", "lr", "accuracy", "val_accuracy", "reward", "kl", "entropy"):
            sev = "warning"
        else:
            sev = "info"
        out.append(
            finding(
                "nonfinite_metric",
                sev,
                f"{s.name} becomes non-finite ({s.nonfinite_examples[0][1] if s.nonfinite_examples else 'nan'}) "
                f"at step {_num(s.nonfinite_first_step)}; {s.nonfinite} of {s.total} values are NaN/Inf.",
                step=s.nonfinite_first_step,
                metric=s.name,
                role=s.role,
                count=s.nonfinite,
                total=s.total,
                examples=[{"step": _num(st), "value": v} for st, v in s.nonfinite_examples],
                step_source="record position" if s.step_from_position else None,
            )
        )
    return out


@dataclass
class LossAnalysis:
    findings: list[Finding]
    spikes: list[tuple[Series, list[float], Spike]]  # for linking with grad norms


def detect_loss(s: Series) -> LossAnalysis:
    steps, means, _ = _timeline(s)
    mean_steps = steps
    vals = means
    # With buckets of several points, a spike lives in the bucket maximum (at its own step).
    if s.width > 1:
        steps, _, vals, _ = s.timeline(peaks=True)
    out: list[Finding] = []
    spikes_out: list[tuple[Series, list[float], Spike]] = []
    if len(vals) < 6 or _is_signed(means):
        return LossAnalysis(out, spikes_out)
    spikes = find_spikes(vals, "loss", steps)
    diverged = False
    for sp in spikes[:MAX_EVENTS_PER_SERIES]:
        tail = len(vals) - sp.start
        tail_flag_frac = sp.flagged / max(1, sp.end - sp.start + 1)
        ev = dict(
            metric_role=s.role,
            baseline=_r(sp.base),
            threshold=_r(sp.threshold),
            robust_sigma=_r(sp.sigma),
            before=_r(vals[sp.start - 1]) if sp.start > 0 else None,
            before_step=_num(steps[sp.start - 1]) if sp.start > 0 else None,
            peak=_r(vals[sp.peak]),
            peak_step=_num(steps[sp.peak]),
            ratio_to_baseline=_r(vals[sp.peak] / sp.base) if sp.base > 0 else None,
            step_source="record position" if s.step_from_position else None,
        )
        if sp.recovered is None and sp.end == len(vals) - 1 and tail >= 4 and tail_flag_frac >= 0.75:
            diverged = True
            # the rise starts at the first record after the last one at the pre-change level
            onset = sp.onset
            calm = sp.base + max(2 * sp.sigma, 0.1 * abs(sp.base))
            spacing = _spacing(steps)
            while (
                onset - 1 >= 0 and vals[onset - 1] > calm and steps[onset] - steps[onset - 1] <= 3 * spacing
            ):
                onset -= 1
            sp.onset = onset
            ev.update(
                before=_r(vals[onset - 1]) if onset > 0 else None,
                before_step=_num(steps[onset - 1]) if onset > 0 else None,
                confirmed_step=_num(steps[sp.start]),
            )
            out.append(
                finding(
                    "divergence",
                    "error",
                    f"{s.name} jumps from about {_r(sp.base)} to {_r(vals[sp.start])} at step "
                    f"{_num(steps[sp.start])}"
                    + (f" (rising from step {_num(steps[onset])})" if onset < sp.start else "")
                    + f" and stays high to the end of the log ({len(vals) - onset} records, last "
                    f"{_r(vals[-1])}): a divergence, not a transient spike.",
                    step=steps[onset],
                    metric=s.name,
                    last=_r(vals[-1]),
                    last_step=_num(steps[-1]),
                    records_elevated=len(vals) - onset,
                    **ev,
                )
            )
            spikes_out.append((s, steps, sp))
            continue
        rec_step = steps[sp.recovered] if sp.recovered is not None else None
        msg = (
            f"{s.name} spikes from about {_r(sp.base)} to {_r(vals[sp.peak])} at step {_num(steps[sp.peak])}"
            + (
                f" and recovers by step {_num(rec_step)}."
                if rec_step is not None
                else "; the log ends before it recovers."
            )
        )
        if sp.onset < sp.start:
            msg += f" It starts rising at step {_num(steps[sp.onset])}."
            ev.update(
                before=_r(vals[sp.onset - 1]) if sp.onset > 0 else None,
                before_step=_num(steps[sp.onset - 1]) if sp.onset > 0 else None,
                confirmed_step=_num(steps[sp.start]),
            )
        out.append(
            finding(
                "loss_spike",
                "warning",
                msg,
                step=steps[sp.onset],
                metric=s.name,
                recovered_step=_num(rec_step),
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
    if not diverged:
        f = _slow_divergence(s, mean_steps, means)
        if f:
            out.append(f)
    f = None if any(x.code == "divergence" for x in out) else _plateau(s, mean_steps, means)
    if f:  # a run that learnt and then diverged is not a plateau
        out.append(f)
    f = _oscillation(s, mean_steps, means)
    if f:
        out.append(f)
    return LossAnalysis(out, spikes_out)


def _rolling_median(vals: list[float], w: int) -> list[float]:
    out = []
    for i in range(len(vals)):
        lo = max(0, i - w + 1)
        out.append(median(vals[lo : i + 1]))
    return out


def _slow_divergence(s: Series, steps: list[float], vals: list[float]) -> Finding | None:
    n = len(vals)
    if n < 30:
        return None
    w = max(5, n // 10)
    rm = _rolling_median(vals, w)
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
        f"{s.name} rises steadily from step {_num(steps[onset])}, from a low of {_r(lo)} (trailing median at "
        f"step {_num(steps[lo_i])}) to {_r(final)} at the end of the log, and does not come back down.",
        step=steps[onset],
        metric=s.name,
        confirmed_step=_num(steps[cross]),
        low=_r(lo),
        low_step=_num(steps[lo_i]),
        final_median=_r(final),
        window_points=w,
        rise=_r(rise),
        threshold=_r(need),
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


def _plateau(s: Series, steps: list[float], vals: list[float]) -> Finding | None:
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
        f"{s.name} makes no meaningful progress over the whole log: median {_r(first)} over the first "
        f"{k} records and {_r(last)} over the last {k} ({improvement * 100:.2f}% better).",
        step=steps[0],
        metric=s.name,
        first_window_median=_r(first),
        last_window_median=_r(last),
        relative_improvement=_r(improvement),
        window_points=k,
        last_step=_num(steps[-1]),
    )


def _oscillation(s: Series, steps: list[float], vals: list[float]) -> Finding | None:
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
        f"of the log (typical swing {_r(amp)} around {_r(level)}) instead of converging"
        + (f"; the alternation starts at step {_num(steps[start])}." if start < n // 2 else "."),
        step=steps[start],
        metric=s.name,
        confirmed_step=_num(steps[n // 2]) if start < n // 2 else None,
        alternation=_r(frac),
        typical_swing=_r(amp),
        level=_r(level),
        records=len(half),
    )


def detect_grad_norm(s: Series) -> list[tuple[Spike, list[float], list[float]]]:
    if s.width > 1:
        steps, _, vals, _ = s.timeline(peaks=True)
    else:
        steps, vals, _ = _timeline(s)
    return [(sp, steps, vals) for sp in find_spikes(vals, "grad_norm", steps)]


def grad_findings(
    s: Series,
    spikes: list[tuple[Spike, list[float], list[float]]],
    loss_spikes: list[tuple[Series, list[float], Spike]],
) -> list[Finding]:
    out = []
    for sp, steps, vals in spikes[:MAX_EVENTS_PER_SERIES]:
        onset_step = steps[sp.onset]
        end_step = steps[sp.end]
        spacing = _spacing(steps)
        lead = None
        linked = None
        for ls, lsteps, lsp in loss_spikes:
            lstart = lsteps[lsp.onset]
            if onset_step <= lstart <= end_step + 3 * spacing and lstart - onset_step <= 50 * spacing:
                lead = lstart - onset_step
                linked = (ls.name, lstart)
                break
        ratio = vals[sp.peak] / sp.base if sp.base > 0 else math.inf
        sev = "warning" if linked or ratio >= 20 else "info"
        msg = (
            f"{s.name} jumps from about {_r(sp.base)} to {_r(vals[sp.peak])} ({_r(ratio)}x) at step "
            f"{_num(steps[sp.peak])}, rising from step {_num(onset_step)}"
        )
        if linked:
            unit = "step" if lead == 1 else "steps"
            msg += f"; it leads the {linked[0]} spike at step {_num(linked[1])} by {_num(lead)} {unit}."
        else:
            msg += "; no loss spike follows it." if sp.recovered is not None else "."
        out.append(
            finding(
                "grad_norm_spike",
                sev,
                msg,
                step=onset_step,
                metric=s.name,
                baseline=_r(sp.base),
                threshold=_r(sp.threshold),
                peak=_r(vals[sp.peak]),
                peak_step=_num(steps[sp.peak]),
                onset_step=_num(onset_step),
                ratio_to_baseline=_r(ratio),
                leads_loss_spike_by=_num(lead),
                loss_spike_step=_num(linked[1]) if linked else None,
                loss_metric=linked[0] if linked else None,
                recovered_step=_num(steps[sp.recovered]) if sp.recovered is not None else None,
                step_source="record position" if s.step_from_position else None,
            )
        )
    return out


def _spacing(steps: list[float]) -> float:
    diffs = [b - a for a, b in itertools.pairwise(steps) if b > a]
    return median(diffs) if diffs else 1.0


def detect_constant(s: Series) -> Finding | None:
    if s.role not in ("loss", "val_loss", "grad_norm", "kl", "loss_component") or s.width > 1:
        return None
    steps, vals, _ = _timeline(s)
    n = len(vals)
    if n < 8:
        return None
    best_len, best_start, run_start = 1, 0, 0
    for i in range(1, n):
        if vals[i] != vals[i - 1]:
            run_start = i
        elif i - run_start + 1 > best_len:
            best_len, best_start = i - run_start + 1, run_start
    need = max(8, int(0.05 * n))
    if best_len < need:
        return None
    return finding(
        "constant_metric",
        "warning",
        f"{s.name} is exactly {_r(vals[best_start])} for {best_len} consecutive records (steps "
        f"{_num(steps[best_start])}-{_num(steps[best_start + best_len - 1])}): a frozen value.",
        step=steps[best_start],
        metric=s.name,
        value=_r(vals[best_start]),
        records=best_len,
        last_step=_num(steps[best_start + best_len - 1]),
        role=s.role,
    )


def detect_overfitting(val: Series, train: Series) -> Finding | None:
    vsteps, vvals, _ = _timeline(val)
    tsteps, tvals, _ = _timeline(train)
    if len(vvals) < 4 or len(tvals) < 6 or _is_signed(vvals):
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
        f"{val.name} is lowest ({_r(vmin)}) at step {_num(vsteps[mi])} and worsens to {_r(vvals[-1])} while "
        f"{train.name} keeps improving ({_r(t_then)} -> {_r(t_now)}).",
        step=vsteps[mi + 1],
        metric=val.name,
        confirmed_step=_num(vsteps[first_bad]),
        best=_r(vmin),
        best_step=_num(vsteps[mi]),
        last=_r(vvals[-1]),
        last_step=_num(vsteps[-1]),
        train_metric=train.name,
        train_at_best=_r(t_then),
        train_last=_r(t_now),
    )


def detect_loss_scale(s: Series) -> tuple[list[Finding], list[float]]:
    """Returns findings and the steps where the scale fell (each fall is an overflow, a skipped step)."""
    steps, vals, _ = _timeline(s)
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
                        f"{s.name} falls from {_r(top)} to {_r(bottom)} ({decreases} drops over steps "
                        f"{_num(steps[start])}-{_num(steps[j - 1])})"
                        + (": it reached its minimum." if at_min else ": repeated fp16 overflows."),
                        step=steps[i],
                        metric=s.name,
                        start_scale=_r(top),
                        end_scale=_r(bottom),
                        factor=_r(factor),
                        drops=decreases,
                        last_step=_num(steps[j - 1]),
                    )
                )
            increased = increased or False
            i = j
            continue
        i += 1
    return out, falls


def detect_throughput(s: Series, batch_changes: bool) -> Finding | None:
    if s.role == "step_time" and batch_changes:
        return None
    steps, vals, _ = _timeline(s)
    n = len(vals)
    if n < 20 or any(v <= 0 for v in vals):
        return None
    w = max(5, n // 10)
    rm = _rolling_median(vals, w)[w - 1 :]
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
        f"{s.name} regresses from about {_r(ref)} to {_r(final)} from step {_num(steps[onset])} on and stays "
        f"there ({(1 - ratio) * 100:.0f}% slower).",
        step=steps[onset],
        metric=s.name,
        confirmed_step=_num(rsteps[k]),
        reference=_r(ref),
        final=_r(final),
        slowdown=_r(1 - ratio),
        window_points=w,
        role=s.role,
    )


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
        st, vals, _ = _timeline(s)
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
        f"The trainer skipped steps ({len(steps)} skips, first at step {_num(ordered[0])}; "
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
        steps=[_num(x) for x in ordered[:50]],
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


def repeated_grad_steps(grad: Series) -> list[float]:
    """Consecutive records with the identical non-zero grad norm: the step was skipped."""
    if grad.width > 1:
        return []
    steps, vals, _ = _timeline(grad)
    out = []
    for i in range(1, len(vals)):
        if vals[i] == vals[i - 1] and vals[i] != 0 and steps[i] - steps[i - 1] <= 1:
            out.append(steps[i])
    return out

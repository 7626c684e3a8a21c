"""Metric series with memory bounded by the number of kept points, not by the log's size.

Values arrive one at a time (cheap list appends) and are folded into fixed-capacity buckets in
chunks with numpy. Each bucket keeps the count, mean, minimum and maximum (with their steps),
so a downsampled series never averages a spike away. Non-finite values are counted apart
(first step and a few examples), and a step that goes backwards starts a new segment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from trainsleuth.tools.logs.numbers import decimals

# Points kept per series before buckets start to merge (the analysis resolution).
DEFAULT_CAPACITY = 4096
# Segments (runs whose steps never go backwards) kept apart; beyond, backward steps join the last
# one (a paste of thousands of excerpts, or logs of different runs interleaved): memory stays bounded.
MAX_SEGMENTS = 1000
_CHUNK = 16384


@dataclass
class Segment:
    """A run of records whose steps never go backwards."""

    first_step: float
    last_step: float
    points: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"first_step": _num(self.first_step), "last_step": _num(self.last_step), "points": self.points}


def _num(x: float) -> int | float:
    return int(x) if float(x).is_integer() else x


_FIELDS = ("first", "last", "count", "mean", "vmin", "min_step", "vmax", "max_step", "seg")


@dataclass
class BucketLists:
    """The buckets' columns as lists (see Buckets.lists)."""

    first: list[float]
    last: list[float]
    count: list[int]
    mean: list[float]
    vmin: list[float]
    min_step: list[float]
    vmax: list[float]
    max_step: list[float]
    seg: list[int]

    def __len__(self) -> int:
        return len(self.first)


_INT_FIELDS = ("count", "seg")


class Buckets:
    """Parallel columns, one entry per bucket (a bucket of width 1 is a raw point). Filled with
    numpy chunks and merged as arrays; read as lists (`lists()`), built once per change."""

    def __init__(self, arrays: dict[str, Any] | None = None) -> None:
        self._arrays = arrays  # the consolidated columns (None: none yet)
        self._parts: list[tuple[Any, ...]] = []  # chunks added since, in _FIELDS order
        self._lists: BucketLists | None = None  # lists(), until the next change
        self._len = len(arrays["first"]) if arrays else 0

    def __len__(self) -> int:
        return self._len

    def extend(self, *columns: Any) -> None:
        """Add buckets: one array per field, in _FIELDS order. Views are copied, so a chunk never
        keeps the caller's (possibly large) array alive."""
        self._parts.append(tuple(c if c.base is None else c.copy() for c in columns))
        self._len += len(columns[0])
        self._lists = None

    def append(self, first: float, last: float, count: int, mean: float, vmin: float, min_step: float,
               vmax: float, max_step: float, seg: int) -> None:  # fmt: skip
        import numpy as np

        values = (first, last, count, mean, vmin, min_step, vmax, max_step, seg)
        self.extend(
            *(
                np.array([v], np.int64 if f in _INT_FIELDS else np.float64)
                for f, v in zip(_FIELDS, values, strict=True)
            )
        )

    def lists(self) -> BucketLists:
        """Every column as a plain list, for the views' loops (read-only; cached until a change)."""
        if self._lists is None:
            arrays = self.arrays()
            self._lists = BucketLists(*(arrays[f].tolist() for f in _FIELDS))
        return self._lists

    def arrays(self) -> dict[str, Any]:
        import numpy as np

        if self._parts:
            columns = list(zip(*self._parts, strict=True))
            base = self._arrays
            self._arrays = {
                f: np.concatenate(([base[f]] if base is not None else []) + list(columns[k]))
                for k, f in enumerate(_FIELDS)
            }
            self._parts = []
        if self._arrays is None:
            return {f: np.empty(0, np.int64 if f in _INT_FIELDS else np.float64) for f in _FIELDS}
        return self._arrays


class Series:
    """One metric, e.g. `lm loss`, with its role and bounded storage."""

    def __init__(self, name: str, role: str, capacity: int = DEFAULT_CAPACITY) -> None:
        self.name = name
        self.role = role
        self.capacity = max(16, capacity)
        self.width = 1  # raw points per bucket
        self.buckets = Buckets()
        self.segments: list[Segment] = []
        self.total = 0  # every value seen, finite or not
        self.nonfinite = 0
        self.nonfinite_first_step: float | None = None
        self.nonfinite_examples: list[tuple[float, str]] = []
        self.nonfinite_runs: list[list[Any]] = []  # [first step, last step, count, repr], log order
        self._tail_nonfinite = False  # the last value ingested was NaN/Inf (a run may go on)
        self.last_raw: tuple[float, float] | None = None  # (step, value) at the highest step, NaN kept
        self.first_raw: tuple[float, float] | None = None  # the first record in the log, NaN kept
        self.decimals: int | None = 0  # places the values are rounded to (None: not rounded)
        self.segments_capped = False  # more than MAX_SEGMENTS restarts
        self.step_from_position = False
        self._steps: list[float] = []
        self._values: list[float] = []
        self._open: list[float] | None = None  # partially filled last bucket: [n, sum, ...]

    # ------------------------------------------------------------------ ingestion

    def add(self, step: float, value: float) -> None:
        self._steps.append(step)
        self._values.append(value)
        if len(self._steps) >= _CHUNK:
            self.flush()

    def flush(self) -> None:
        steps, values = self._steps, self._values
        if not steps:
            return
        self._steps, self._values = [], []
        import numpy as np

        self.add_many(np.asarray(steps, dtype=np.float64), np.asarray(values, dtype=np.float64))

    def add_many(self, steps: Any, values: Any) -> None:
        """Ingest numpy arrays of steps and values (in log order), vectorised."""
        import numpy as np

        if self._steps:
            pending_s, pending_v = self._steps, self._values
            self._steps, self._values = [], []
            steps = np.concatenate([np.asarray(pending_s, dtype=np.float64), steps])
            values = np.concatenate([np.asarray(pending_v, dtype=np.float64), values])
        n = len(steps)
        if n == 0:
            return
        self.total += n
        if self.first_raw is None:
            self.first_raw = (float(steps[0]), float(values[0]))
        top = n - 1 - int(np.argmax(steps[::-1]))  # the last record at the highest step
        if self.last_raw is None or steps[top] >= self.last_raw[0]:
            self.last_raw = (float(steps[top]), float(values[top]))
        back = steps[1:] < steps[:-1]
        breaks = (np.flatnonzero(back) + 1).tolist() if back.any() else []
        for a, b in zip([0, *breaks], [*breaks, n], strict=True):
            st, v = steps[a:b], values[a:b]
            first = float(st[0])
            if not self.segments or first < self.segments[-1].last_step:
                if len(self.segments) < MAX_SEGMENTS:
                    self._close_open()
                    self.segments.append(Segment(first, first))
                else:  # past MAX_SEGMENTS restarts the steps are no timeline: later ones join the last
                    self.segments_capped = True
            seg = self.segments[-1]
            seg.first_step = min(seg.first_step, first)
            seg.last_step = float(st[-1])
            seg.points += b - a
            if not all_finite(v):
                finite = np.isfinite(v)
                bad = ~finite
                self._runs(st, v, bad)
                self.nonfinite += int(bad.sum())
                bad_steps, bad_vals = st[bad], v[bad]
                if self.nonfinite_first_step is None:
                    self.nonfinite_first_step = float(bad_steps[0])
                for k in range(min(len(bad_steps), 5 - len(self.nonfinite_examples))):
                    self.nonfinite_examples.append((float(bad_steps[k]), repr(float(bad_vals[k]))))
                st, v = st[finite], v[finite]
            else:
                self._tail_nonfinite = False
            if len(v) and self.decimals is not None:
                self.decimals = decimals(v, self.decimals)
            if len(v):
                self._ingest_finite(st, v, len(self.segments) - 1)
        self._compress()

    def _runs(self, st: Any, v: Any, bad: Any) -> None:
        """Record the runs of consecutive non-finite values (bounded: later runs join the last)."""
        import numpy as np

        edges = np.flatnonzero(np.diff(np.concatenate(([0], bad.astype(np.int8), [0]))))
        for a, b in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True):
            first, last, count = float(st[a]), float(st[b - 1]), b - a
            if a == 0 and self._tail_nonfinite and self.nonfinite_runs:
                run = self.nonfinite_runs[-1]
                run[1], run[2] = last, run[2] + count
            elif len(self.nonfinite_runs) >= 256:
                run = self.nonfinite_runs[-1]
                run[1], run[2] = max(run[1], last), run[2] + count
            else:
                self.nonfinite_runs.append([first, last, count, repr(float(v[a]))])
        self._tail_nonfinite = bool(bad[-1])

    def _ingest_finite(self, st: Any, v: Any, seg: int) -> None:
        import numpy as np

        n = len(v)
        levels = self._levels_needed(n + (int(self._open[2]) if self._open else 0))
        if levels:
            self._merge(levels)
        b = self.buckets
        if self.width == 1:
            ones = np.ones(n, np.int64)
            b.extend(st, st, ones, v, v, st, v, st, np.full(n, seg, np.int64))
            return
        i = 0
        o = self._open
        if o is not None and int(o[8]) == seg:
            take = min(n, self.width - int(o[2]))
            part_v, part_s = v[:take], st[:take]
            o[1] = float(part_s[-1])
            o[2] += take
            o[3] += float(part_v.sum())
            lo, hi = int(part_v.argmin()), int(part_v.argmax())
            if part_v[lo] < o[4]:
                o[4], o[5] = float(part_v[lo]), float(part_s[lo])
            if part_v[hi] > o[6]:
                o[6], o[7] = float(part_v[hi]), float(part_s[hi])
            i = take
            if o[2] >= self.width:
                self._close_open()
        elif o is not None:
            self._close_open()
        w = self.width
        full = (n - i) // w
        if full:
            V = v[i : i + full * w].reshape(full, w)
            S = st[i : i + full * w].reshape(full, w)
            rows = np.arange(full)
            amin, amax = V.argmin(axis=1), V.argmax(axis=1)
            b.extend(
                S[:, 0], S[:, -1], np.full(full, w, np.int64), V.mean(axis=1), V[rows, amin], S[rows, amin],
                V[rows, amax], S[rows, amax], np.full(full, seg, np.int64),
            )  # fmt: skip
            i += full * w
        if i < n:
            rv, rs = v[i:], st[i:]
            lo, hi = int(rv.argmin()), int(rv.argmax())
            self._open = [float(rs[0]), float(rs[-1]), n - i, float(rv.sum()), float(rv[lo]), float(rs[lo]),
                          float(rv[hi]), float(rs[hi]), seg]  # fmt: skip

    def _close_open(self) -> None:
        o = self._open
        if o is None:
            return
        self._open = None
        self.buckets.append(o[0], o[1], int(o[2]), o[3] / o[2], o[4], o[5], o[6], o[7], int(o[8]))

    def _compress(self) -> None:
        levels = self._levels_needed(0)
        if levels:
            self._merge(levels)

    def _levels_needed(self, incoming: int) -> int:
        """How many times the buckets must be halved (merged pairwise inside each segment) for
        them and `incoming` raw points to fit the capacity."""
        b = self.buckets
        if len(b) + incoming / self.width <= self.capacity:
            return 0
        import numpy as np

        seg = b.arrays()["seg"]
        bounds = np.concatenate(([0], np.flatnonzero(seg[1:] != seg[:-1]) + 1, [len(seg)]))
        counts = np.diff(bounds)  # buckets per segment (runs of equal seg)
        levels = 0
        largest = int(counts.max()) if len(counts) else 1
        while True:
            levels += 1
            factor = 1 << levels
            fits = int((-(-counts // factor)).sum()) + incoming / (self.width * factor) <= self.capacity
            if fits or factor >= 2 * largest:  # one bucket per segment is as far as merging goes
                return levels

    def _merge(self, levels: int) -> None:
        """Merge the buckets in aligned groups of 2**levels inside each segment (what halving them
        `levels` times does), in one vectorised pass; the width grows by the same factor. A group's
        minimum and maximum keep their own steps (the earliest on a tie)."""
        import numpy as np

        factor = 1 << levels
        self.width *= factor
        old = self.buckets
        n = len(old)
        if n < 2:
            return
        f = old.arrays()
        seg = f["seg"]
        pos = np.arange(n)
        seg_start = np.zeros(n, dtype=np.int64)
        cuts = np.flatnonzero(seg[1:] != seg[:-1]) + 1
        seg_start[cuts] = cuts
        seg_start = np.maximum.accumulate(seg_start)
        starts = np.flatnonzero((pos - seg_start) % factor == 0)
        ends = np.append(starts[1:], n)
        count = np.add.reduceat(f["count"], starts)
        total = np.add.reduceat(f["mean"] * f["count"], starts)
        vmin = np.minimum.reduceat(f["vmin"], starts)
        vmax = np.maximum.reduceat(f["vmax"], starts)
        group = np.repeat(np.arange(len(starts)), ends - starts)
        # the earliest position of each group's minimum and maximum
        lo = np.minimum.reduceat(np.where(f["vmin"] == vmin[group], pos, n), starts)
        hi = np.minimum.reduceat(np.where(f["vmax"] == vmax[group], pos, n), starts)
        new = Buckets(
            {
                "first": f["first"][starts],
                "last": f["last"][ends - 1],
                "count": count,
                "mean": total / count,
                "vmin": vmin,
                "min_step": f["min_step"][lo],
                "vmax": vmax,
                "max_step": f["max_step"][hi],
                "seg": seg[starts],
            }
        )
        self.buckets = new

    def finish(self) -> None:
        self.flush()
        self._close_open()
        self._compress()

    # ------------------------------------------------------------------ views

    @property
    def finite_points(self) -> int:
        return self.total - self.nonfinite

    def timeline(self, peaks: bool = False) -> tuple[list[float], list[float], list[float], list[float]]:
        """Steps, means, maxima and minima in step order, segments combined.

        Segments are combined the way restarts and pasted excerpts behave: a step logged again
        by a later segment replaces the earlier record (a resumed run overwrites what the crashed
        run logged after its checkpoint); everything else is kept and put in step order.
        """
        self.finish()
        b = self.buckets.lists()
        n = len(b)
        if n == 0:
            return [], [], [], []
        nseg = len(self.segments)
        keep = [True] * n
        if nseg > 1:
            # A step logged again by a later segment (a resumed run) replaces the earlier record.
            latest: dict[float, int] = {}
            for i in range(n):
                latest[b.first[i]] = i
            for i in range(n):
                if latest[b.first[i]] != i:
                    keep[i] = False
            order = sorted((i for i in range(n) if keep[i]), key=lambda i: (b.first[i], b.seg[i]))
        else:
            order = list(range(n))
        if peaks:  # a merged bucket is placed at its maximum (where a spike is)
            steps = [b.first[i] if b.count[i] == 1 else b.max_step[i] for i in order]
        else:
            steps = [b.first[i] if b.count[i] == 1 else (b.first[i] + b.last[i]) / 2 for i in order]
        return steps, [b.mean[i] for i in order], [b.vmax[i] for i in order], [b.vmin[i] for i in order]

    def downsample(self, max_points: int, step_min: float | None = None, step_max: float | None = None
                   ) -> list[tuple[float, float]]:  # fmt: skip
        """At most `max_points` (step, value) pairs in step order; the minimum and maximum of each
        span are kept, and so are the first and last step of every run of NaN/Inf values (as NaN
        or Inf), so a series that ends in NaN shows it."""
        self.finish()
        b = self.buckets.lists()
        pts: list[tuple[float, float]] = []
        order = sorted(range(len(b)), key=lambda i: (b.first[i], b.seg[i]))
        for i in order:
            if b.count[i] == 1:
                pts.append((b.first[i], b.mean[i]))
            else:
                a, c = (b.min_step[i], b.vmin[i]), (b.max_step[i], b.vmax[i])
                pts.extend(sorted([a, c]) if a != c else [a])
        bad: list[tuple[float, float]] = []
        for first, last, _count, text in self.nonfinite_runs:
            value = float(text)
            bad.append((first, value))
            if last != first:
                bad.append((last, value))

        def within(p: tuple[float, float]) -> bool:
            return (step_min is None or p[0] >= step_min) and (step_max is None or p[0] <= step_max)

        pts = [p for p in pts if within(p)]
        bad = [p for p in bad if within(p)]
        if not bad:
            return lttb_extremes(pts, max_points)
        bad = bad[: max(2, max_points // 4)]
        kept = lttb_extremes(pts, max(2, max_points - len(bad))) if pts else []
        return sorted(kept + bad, key=lambda p: p[0])[:max_points]

    def summary(self) -> dict[str, Any]:
        self.finish()
        b = self.buckets.lists()
        out: dict[str, Any] = {
            "name": self.name,
            "role": self.role,
            "points": self.total,
            "kept_points": len(b),
        }
        if len(b):
            lo = min(range(len(b)), key=lambda i: b.vmin[i])
            hi = max(range(len(b)), key=lambda i: b.vmax[i])
            order = sorted(range(len(b)), key=lambda i: (b.first[i], b.seg[i]))
            out.update(
                first_step=_num(b.first[order[0]]),
                last_step=_num(b.last[order[-1]]),
                first=_round(b.mean[order[0]]),
                last=_round(b.mean[order[-1]]),
                min=_round(b.vmin[lo]),
                min_step=_num(b.min_step[lo]),
                max=_round(b.vmax[hi]),
                max_step=_num(b.max_step[hi]),
            )
        if self.first_raw is not None and (not len(b) or self.first_raw[0] <= out["first_step"]):
            out["first_step"] = _num(self.first_raw[0])
            out["first"] = json_value(self.first_raw[1])
        if self.last_raw is not None and (not len(b) or self.last_raw[0] >= out["last_step"]):
            # the value at the highest step, NaN and Inf included: a run ending in NaN says so
            out["last_step"] = _num(self.last_raw[0])
            out["last"] = json_value(self.last_raw[1])
        if self.nonfinite:
            out["nonfinite"] = self.nonfinite
            out["first_nonfinite_step"] = (
                _num(self.nonfinite_first_step) if self.nonfinite_first_step is not None else None
            )
        if len(self.segments) > 1:
            out["segments"] = len(self.segments)
        if self.step_from_position:
            out["step_source"] = "record position (the log has no step numbers)"
        if self.decimals is not None and len(b) and self.decimals <= 6:
            out["resolution"] = 10.0**-self.decimals
        return out

    @property
    def resolution(self) -> float:
        """The smallest difference the printed values can show (0: not rounded to fixed places)."""
        return 10.0**-self.decimals if self.decimals is not None and self.decimals <= 6 else 0.0


def json_value(x: float) -> float | str:
    """A value for JSON: NaN and Inf as the strings "nan", "inf", "-inf" (JSON has no NaN)."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return _round(x)


def all_finite(v: Any) -> bool:
    """True when no value is NaN or infinite: one summing pass decides in the usual case (a finite
    sum has no NaN or Inf in it; an overflowing sum is checked value by value)."""
    import numpy as np

    with np.errstate(over="ignore", invalid="ignore"):
        total = float(v.sum())
    return math.isfinite(total) or bool(np.isfinite(v).all())


def _round(x: float) -> float:
    if not math.isfinite(x) or x == 0:
        return x
    return float(f"{x:.6g}")


def lttb_extremes(points: list[tuple[float, float]], max_points: int) -> list[tuple[float, float]]:
    """Reduce to at most `max_points`, keeping each span's minimum and maximum (and the ends)."""
    n = len(points)
    max_points = max(2, max_points)
    if n <= max_points:
        return points
    spans = max(1, (max_points - 2) // 2)
    out: list[tuple[float, float]] = [points[0]]
    inner = points[1:-1]
    size = len(inner) / spans
    for k in range(spans):
        chunk = inner[int(k * size) : int((k + 1) * size)]
        if not chunk:
            continue
        lo = min(chunk, key=lambda p: p[1])
        hi = max(chunk, key=lambda p: p[1])
        out.extend(sorted({lo, hi}))
    out.append(points[-1])
    return out[:max_points]

"""Metric series with memory bounded by the number of kept points, not by the log's size.

Values arrive one at a time (cheap list appends) and are folded into fixed-capacity buckets in
chunks with numpy. Each bucket keeps the count, mean, minimum and maximum (with their steps),
so a downsampled series never averages a spike away. Non-finite values are counted apart
(first step and a few examples), and a step that goes backwards starts a new segment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

# Points kept per series before buckets start to merge (the analysis resolution).
DEFAULT_CAPACITY = 4096
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


@dataclass
class Buckets:
    """Parallel arrays, one entry per bucket (a bucket of width 1 is a raw point)."""

    first: list[float] = field(default_factory=list)  # first step in the bucket
    last: list[float] = field(default_factory=list)  # last step
    count: list[int] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    vmin: list[float] = field(default_factory=list)
    min_step: list[float] = field(default_factory=list)
    vmax: list[float] = field(default_factory=list)
    max_step: list[float] = field(default_factory=list)
    seg: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.first)

    def append(self, first: float, last: float, count: int, mean: float, vmin: float, min_step: float,
               vmax: float, max_step: float, seg: int) -> None:  # fmt: skip
        self.first.append(first)
        self.last.append(last)
        self.count.append(count)
        self.mean.append(mean)
        self.vmin.append(vmin)
        self.min_step.append(min_step)
        self.vmax.append(vmax)
        self.max_step.append(max_step)
        self.seg.append(seg)


_FIELDS = ("first", "last", "count", "mean", "vmin", "min_step", "vmax", "max_step", "seg")


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
        breaks = (np.flatnonzero(steps[1:] < steps[:-1]) + 1).tolist()
        for a, b in zip([0, *breaks], [*breaks, n], strict=True):
            st, v = steps[a:b], values[a:b]
            first = float(st[0])
            if not self.segments or first < self.segments[-1].last_step:
                self._close_open()
                self.segments.append(Segment(first, first))
            seg = self.segments[-1]
            seg.last_step = float(st[-1])
            seg.points += b - a
            finite = np.isfinite(v)
            if not finite.all():
                bad = ~finite
                self.nonfinite += int(bad.sum())
                bad_steps, bad_vals = st[bad], v[bad]
                if self.nonfinite_first_step is None:
                    self.nonfinite_first_step = float(bad_steps[0])
                for k in range(min(len(bad_steps), 5 - len(self.nonfinite_examples))):
                    self.nonfinite_examples.append((float(bad_steps[k]), repr(float(bad_vals[k]))))
                st, v = st[finite], v[finite]
            if len(v):
                self._ingest_finite(st, v, len(self.segments) - 1)
        self._compress()

    def _ingest_finite(self, st: Any, v: Any, seg: int) -> None:
        import numpy as np

        n = len(v)
        while len(self.buckets) + (n + (self._open[2] if self._open else 0)) / self.width > self.capacity:
            self._merge_pairs()
        b = self.buckets
        if self.width == 1:
            sl, vl = st.tolist(), v.tolist()
            b.first.extend(sl)
            b.last.extend(sl)
            b.count.extend([1] * n)
            b.mean.extend(vl)
            b.vmin.extend(vl)
            b.min_step.extend(sl)
            b.vmax.extend(vl)
            b.max_step.extend(sl)
            b.seg.extend([seg] * n)
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
            b.first.extend(S[:, 0].tolist())
            b.last.extend(S[:, -1].tolist())
            b.count.extend([w] * full)
            b.mean.extend(V.mean(axis=1).tolist())
            b.vmin.extend(V[rows, amin].tolist())
            b.min_step.extend(S[rows, amin].tolist())
            b.vmax.extend(V[rows, amax].tolist())
            b.max_step.extend(S[rows, amax].tolist())
            b.seg.extend([seg] * full)
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
        while len(self.buckets) > self.capacity:
            self._merge_pairs()

    def _merge_pairs(self) -> None:
        """Halve the number of buckets: merge neighbours pairwise inside each segment (vectorised)."""
        import numpy as np

        old = self.buckets
        n = len(old)
        self.width *= 2
        if n < 2:
            return
        f = {name: np.asarray(getattr(old, name)) for name in _FIELDS}
        seg = f["seg"]
        cuts = (np.flatnonzero(seg[1:] != seg[:-1]) + 1).tolist()
        pieces: dict[str, list[Any]] = {name: [] for name in _FIELDS}
        for a, e in zip([0, *cuts], [*cuts, n], strict=True):
            pairs = (e - a) // 2
            if pairs:
                i = np.arange(a, a + 2 * pairs, 2)
                j = i + 1
                ci, cj = f["count"][i], f["count"][j]
                count = ci + cj
                lo = np.where(f["vmin"][i] <= f["vmin"][j], i, j)
                hi = np.where(f["vmax"][i] >= f["vmax"][j], i, j)
                pieces["first"].append(f["first"][i])
                pieces["last"].append(f["last"][j])
                pieces["count"].append(count)
                pieces["mean"].append((f["mean"][i] * ci + f["mean"][j] * cj) / count)
                pieces["vmin"].append(f["vmin"][lo])
                pieces["min_step"].append(f["min_step"][lo])
                pieces["vmax"].append(f["vmax"][hi])
                pieces["max_step"].append(f["max_step"][hi])
                pieces["seg"].append(seg[i])
            if (e - a) % 2:
                for name in _FIELDS:
                    pieces[name].append(f[name][e - 1 : e])
        new = Buckets()
        for name in _FIELDS:
            setattr(new, name, np.concatenate(pieces[name]).tolist())
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
        b = self.buckets
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
        """At most `max_points` (step, value) pairs; the minimum and maximum of each span are kept."""
        self.finish()
        b = self.buckets
        pts: list[tuple[float, float]] = []
        order = sorted(range(len(b)), key=lambda i: (b.first[i], b.seg[i]))
        for i in order:
            if b.count[i] == 1:
                pts.append((b.first[i], b.mean[i]))
            else:
                a, c = (b.min_step[i], b.vmin[i]), (b.max_step[i], b.vmax[i])
                pts.extend(sorted([a, c]) if a != c else [a])
        if step_min is not None:
            pts = [p for p in pts if p[0] >= step_min]
        if step_max is not None:
            pts = [p for p in pts if p[0] <= step_max]
        return lttb_extremes(pts, max_points)

    def summary(self) -> dict[str, Any]:
        self.finish()
        b = self.buckets
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
        if self.nonfinite:
            out["nonfinite"] = self.nonfinite
        if len(self.segments) > 1:
            out["segments"] = len(self.segments)
        if self.step_from_position:
            out["step_source"] = "record position (the log has no step numbers)"
        return out


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

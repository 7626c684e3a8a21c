"""Bounded series: however values arrive, the buckets partition the finite points in log order,
each bucket's minimum and maximum are exact (with their steps), and the capacity holds."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from trainsleuth.tools.logs.series import Series


def _segments(steps: list[float]) -> list[list[int]]:
    """Indices of each run whose steps never go backwards."""
    runs: list[list[int]] = []
    for i, s in enumerate(steps):
        if not runs or s < steps[runs[-1][-1]]:
            runs.append([])
        runs[-1].append(i)
    return runs


def _check(series: Series, steps: list[float], values: list[float]) -> None:
    series.finish()
    b = series.buckets.lists()
    assert len(b) <= series.capacity
    assert series.total == len(values)
    assert series.nonfinite == sum(1 for v in values if not math.isfinite(v))
    runs = _segments(steps)
    assert len(series.segments) == len(runs)
    k = 0
    for seg_no, run in enumerate(runs):
        finite = [i for i in run if math.isfinite(values[i])]
        pos = 0
        while pos < len(finite):
            assert b.seg[k] == seg_no
            part = finite[pos : pos + b.count[k]]
            assert len(part) == b.count[k]
            vals = [values[i] for i in part]
            assert (b.first[k], b.last[k]) == (steps[part[0]], steps[part[-1]])
            lo = min(range(len(vals)), key=lambda j: (vals[j], j))
            hi = min(range(len(vals)), key=lambda j: (-vals[j], j))
            assert (b.vmin[k], b.min_step[k]) == (vals[lo], steps[part[lo]])
            assert (b.vmax[k], b.max_step[k]) == (vals[hi], steps[part[hi]])
            assert math.isclose(b.mean[k], sum(vals) / len(vals), rel_tol=1e-9, abs_tol=1e-9)
            pos += b.count[k]
            k += 1
    assert k == len(b)


_ties = st.integers(-2, 2).map(float)  # ties: the earliest minimum or maximum keeps its step
_values = st.one_of(
    _ties, _ties, _ties, st.floats(-1e6, 1e6), st.sampled_from([math.nan, math.inf, -math.inf])
)


@settings(max_examples=120, deadline=None)
@given(
    data=st.lists(st.tuples(st.integers(0, 40), _values), min_size=1, max_size=900),
    chunks=st.lists(st.integers(1, 300), min_size=1, max_size=12),
    capacity=st.sampled_from([16, 32, 100]),
)
def test_buckets_partition_the_points_with_exact_extremes(
    data: list[tuple[int, float]], chunks: list[int], capacity: int
) -> None:
    # steps mostly increase, with a few restarts (a step of 0 goes back)
    steps: list[float] = []
    for delta, _ in data:
        steps.append(0.0 if delta == 0 and steps else (steps[-1] if steps else 0.0) + delta)
    values = [v for _, v in data]
    series = Series("loss", "loss", capacity)
    i = c = 0
    while i < len(values):  # alternate single values and numpy chunks of varying size
        size = chunks[c % len(chunks)]
        c += 1
        if size % 3 == 0:
            for j in range(i, min(len(values), i + size)):
                series.add(steps[j], values[j])
        else:
            end = min(len(values), i + size)
            series.add_many(np.asarray(steps[i:end]), np.asarray(values[i:end]))
        i += size
    _check(series, steps, values)


def test_merging_buckets_keeps_the_earliest_of_tied_extremes() -> None:
    steps = [float(i) for i in range(40)]
    values = [float(i % 3) for i in range(40)]
    series = Series("loss", "loss", 16)
    series.add_many(np.asarray(steps[:16]), np.asarray(values[:16]))  # 16 raw points: full
    series.add_many(np.asarray(steps[16:]), np.asarray(values[16:]))  # the 16 buckets are merged
    assert series.width == 4
    _check(series, steps, values)


def test_a_spike_survives_a_million_points() -> None:
    rng = np.random.default_rng(0)
    values = rng.normal(2.0, 0.01, 1_000_000)
    values[654_321] = 40.0
    steps = np.arange(1, 1_000_001, dtype=np.float64)
    series = Series("loss", "loss")
    for a in range(0, 1_000_000, 130_000):
        series.add_many(steps[a : a + 130_000], values[a : a + 130_000])
    summary = series.summary()
    assert summary["max"] == 40.0 and summary["max_step"] == 654_322
    assert summary["kept_points"] <= series.capacity
    assert math.isclose(sum(c * m for c, m in zip(series.buckets.lists().count, series.buckets.lists().mean, strict=True)),
                        float(values.sum()), rel_tol=1e-9)  # fmt: skip

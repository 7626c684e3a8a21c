"""The tiny protocol every benchmark in `benchmarks/` follows, so `python -m benchmarks` can run them all.

A benchmark is a module `benchmarks/<name>.py` (or a package `benchmarks/<name>/`) that defines

    def run_benchmark(quick: bool = False) -> BenchResult | list[BenchResult]

It measures the candidate and its baseline side by side (same machine, same moment) and returns one
result per figure it reports. `quick=True` asks for a smaller, faster run (fewer repetitions, smaller
inputs); a benchmark may ignore it. A benchmark that cannot run (a dependency or a feature is missing)
raises an exception with a plain message: the aggregator reports it as failed and carries on.

Use `result(...)` to build a record: it checks the fields and computes `met` from the ratio, the goal
and the direction, so every benchmark judges its goal the same way.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any, Literal, TypedDict

Direction = Literal["higher", "lower"]


class _BenchRequired(TypedDict):
    name: str  # what is measured, e.g. "log analysis throughput vs one-regex baseline"
    ratio: float | None  # the figure: candidate / baseline (or a score such as recall); None if not measured
    baseline: str  # what the ratio is against, in words (with its absolute value where useful)
    goal: float  # the target for `ratio`
    met: bool  # whether `ratio` reaches `goal` in the given direction


class BenchResult(_BenchRequired, total=False):
    direction: Direction  # "higher" (default): ratio >= goal is good; "lower": ratio <= goal is good
    unit: str  # how to read the ratio, e.g. "x faster", "x time", "recall"
    details: str  # one or two lines: absolute numbers, sizes, repetitions
    command: str  # the command that reproduces this figure


REQUIRED_KEYS = ("name", "ratio", "baseline", "goal", "met")


def is_met(ratio: float | None, goal: float, direction: Direction = "higher") -> bool:
    if ratio is None or (isinstance(ratio, float) and math.isnan(ratio)):
        return False
    return ratio >= goal if direction == "higher" else ratio <= goal


def result(
    name: str,
    ratio: float | None,
    baseline: str,
    goal: float,
    *,
    direction: Direction = "higher",
    unit: str = "",
    details: str = "",
    command: str = "",
) -> BenchResult:
    """Build a BenchResult; `met` follows from ratio, goal and direction."""
    if direction not in ("higher", "lower"):
        raise ValueError(f"direction must be 'higher' or 'lower', not {direction!r}")
    out: BenchResult = {
        "name": name,
        "ratio": None if ratio is None else float(ratio),
        "baseline": baseline,
        "goal": float(goal),
        "met": is_met(ratio, goal, direction),
        "direction": direction,
    }
    if unit:
        out["unit"] = unit
    if details:
        out["details"] = details
    if command:
        out["command"] = command
    return out


def validate(obj: Any) -> list[BenchResult]:
    """Normalise what `run_benchmark` returned to a list of checked records (ValueError if malformed)."""
    items = obj if isinstance(obj, list) else [obj]
    if not items:
        raise ValueError("run_benchmark returned an empty list")
    out: list[BenchResult] = []
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(
                f"run_benchmark must return a dict or a list of dicts, got {type(item).__name__}"
            )
        missing = [k for k in REQUIRED_KEYS if k not in item]
        if missing:
            raise ValueError(f"benchmark result lacks {', '.join(missing)}: {item!r}")
        ratio = item["ratio"]
        if ratio is not None and not isinstance(ratio, (int, float)):
            raise ValueError(f"'ratio' must be a number or None, got {ratio!r}")
        if not isinstance(item["goal"], (int, float)):
            raise ValueError(f"'goal' must be a number, got {item['goal']!r}")
        direction = item.get("direction", "higher")
        if direction not in ("higher", "lower"):
            raise ValueError(f"'direction' must be 'higher' or 'lower', got {direction!r}")
        out.append(item)  # type: ignore[arg-type]
    return out


def time_side_by_side(
    candidate: Callable[[], Any], baseline: Callable[[], Any], repeats: int = 5
) -> tuple[float, float]:
    """Median wall time of candidate and baseline, interleaved run by run (the machine is shared and noisy)."""
    cand: list[float] = []
    base: list[float] = []
    for _ in range(repeats):
        for fn, bucket in ((baseline, base), (candidate, cand)):
            t0 = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - t0)
    return statistics.median(cand), statistics.median(base)

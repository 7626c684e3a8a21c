"""What every log detector shares: the finding record, number formatting, robust statistics."""

from __future__ import annotations

import itertools
import math
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


def as_step(x: float | None) -> int | float | None:
    if x is None:
        return None
    if isinstance(x, float) and math.isfinite(x) and x.is_integer():
        return int(x)
    return round(x, 3) if math.isfinite(x) else x


def r6(x: float) -> float:
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


def step_spacing(steps: list[float]) -> float:
    diffs = [b - a for a, b in itertools.pairwise(steps) if b > a]
    return median(diffs) if diffs else 1.0


def rolling_median(vals: list[float], w: int) -> list[float]:
    """The median of each value and the w - 1 before it (fewer at the start), vectorised: a
    series holds up to 4096 kept points and w is a tenth of them."""
    import numpy as np

    n = len(vals)
    head = [median(vals[: i + 1]) for i in range(min(w - 1, n))]
    if n < w:
        return head
    windows = np.lib.stride_tricks.sliding_window_view(np.asarray(vals, dtype=np.float64), w)
    return head + np.median(windows, axis=1).tolist()


def timeline(s: Series) -> tuple[list[float], list[float], list[float]]:
    steps, means, maxes, _ = s.timeline()
    return steps, means, maxes


def is_signed(vals: list[float]) -> bool:
    return bool(vals) and min(vals) < 0

"""Chosen metric series, downsampled to at most N points with each span's extremes kept."""

from __future__ import annotations

import threading
from pathlib import Path

from pydantic import BaseModel, Field

from trainsleuth.tools.logs.analyze import collect
from trainsleuth.tools.logs.readers import LogInputError, Progress
from trainsleuth.tools.logs.series import DEFAULT_CAPACITY


class ExtractedSeries(BaseModel):
    name: str
    role: str
    points_in_log: int
    steps: list[float] = Field(default_factory=list)
    values: list[float] = Field(default_factory=list)
    nonfinite: int = 0
    first_nonfinite_step: float | None = None
    step_source: str = "log"


class ExtractResult(BaseModel):
    path: str
    format: str
    series: list[ExtractedSeries] = Field(default_factory=list)
    available: dict[str, str] = Field(
        default_factory=dict, description="every metric name in the log -> role"
    )
    missing: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


def extract(path: Path | str, metrics: list[str], *, max_points: int = 500, step_min: float | None = None,
            step_max: float | None = None, fmt: str = "auto", progress: Progress | None = None,
            cancel: threading.Event | None = None) -> ExtractResult:  # fmt: skip
    """`metrics` are names as in the log or roles (`loss`, `grad_norm`, ...); empty means the
    loss, val_loss, grad_norm and lr roles."""
    if max_points < 2:
        raise LogInputError("max_points must be at least 2", "ask for 2 or more points")
    if step_min is not None and step_max is not None and step_min > step_max:
        raise LogInputError(f"step_min {step_min} is above step_max {step_max}", "swap them")
    collector, _, stats = collect(Path(path), fmt, capacity=max(DEFAULT_CAPACITY, 2 * max_points),
                                  progress=progress, cancel=cancel)  # fmt: skip
    result = ExtractResult(path=str(path), format=stats.format)
    result.available = {name: s.role for name, s in collector.series.items()}
    wanted = metrics or ["loss", "val_loss", "grad_norm", "lr"]
    chosen: list[str] = []
    for want in wanted:
        if want in collector.series:
            chosen.append(want)
            continue
        by_role = [n for n, s in collector.series.items() if s.role == want]
        ci = [n for n in collector.series if n.lower() == want.lower()]
        if by_role:
            chosen.extend(by_role)
        elif ci:
            chosen.extend(ci)
        elif metrics:
            result.missing.append(want)
    seen: set[str] = set()
    for name in chosen:
        if name in seen:
            continue
        seen.add(name)
        s = collector.series[name]
        pts = s.downsample(max_points, step_min, step_max)
        result.series.append(
            ExtractedSeries(
                name=name,
                role=s.role,
                points_in_log=s.total,
                steps=[p[0] for p in pts],
                values=[p[1] for p in pts],
                nonfinite=s.nonfinite,
                first_nonfinite_step=s.nonfinite_first_step,
                step_source="record position" if s.step_from_position else "log",
            )
        )
    if not collector.series:
        result.notes.append("No metrics found in this log.")
    elif result.missing:
        result.notes.append(
            f"not in the log: {', '.join(result.missing)}; see `available` for the names it has"
        )
    return result

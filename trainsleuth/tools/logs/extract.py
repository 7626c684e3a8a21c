"""Chosen metric series, downsampled to at most N points with each span's extremes kept and the
runs of NaN/Inf values marked (as the strings "nan", "inf", "-inf": JSON has no NaN)."""

from __future__ import annotations

import threading
from pathlib import Path

from pydantic import BaseModel, Field

from trainsleuth.tools.logs.analyze import collect
from trainsleuth.tools.logs.infer import assign_roles, parse_roles
from trainsleuth.tools.logs.readers import LogInputError, Progress
from trainsleuth.tools.logs.series import DEFAULT_CAPACITY, json_value


class ExtractedSeries(BaseModel):
    name: str
    role: str
    points_in_log: int
    steps: list[float] = Field(default_factory=list)
    values: list[float | str] = Field(default_factory=list, description='"nan"/"inf"/"-inf" where not finite')
    nonfinite: int = 0
    first_nonfinite_step: float | None = None
    step_source: str = "log"
    resolution: float | None = None


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
            cancel: threading.Event | None = None, roles: list[str] | dict[str, str] | None = None,
            roots: list[Path] | None = None) -> ExtractResult:  # fmt: skip
    """`metrics` are names as in the log or roles (`loss`, `grad_norm`, ...); empty means the
    loss, val_loss, grad_norm and lr roles. `roles` corrects the reading as in `analyze`."""
    if max_points < 2:
        raise LogInputError("max_points must be at least 2", "ask for 2 or more points")
    if step_min is not None and step_max is not None and step_min > step_max:
        raise LogInputError(f"step_min {step_min} is above step_max {step_max}", "swap them")
    user = parse_roles(roles)
    collector, _, stats = collect(Path(path), fmt, capacity=max(DEFAULT_CAPACITY, 2 * max_points),
                                  progress=progress, cancel=cancel, roots=roots, step_key=user.get("step"))  # fmt: skip
    understanding = assign_roles(collector, user)
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
                values=[json_value(p[1]) if p[1] != p[1] or abs(p[1]) == float("inf") else p[1] for p in pts],
                nonfinite=s.nonfinite,
                first_nonfinite_step=s.nonfinite_first_step,
                step_source="record position" if s.step_from_position else "log",
                resolution=s.resolution or None,
            )
        )
    if not collector.series:
        result.notes.append("No metrics found in this log.")
    elif result.missing:
        result.notes.append(
            f"not in the log: {', '.join(result.missing)}; see `available` for the names it has"
        )
    elif not understanding.understood and not metrics:
        result.notes.append("no series is recognised as the loss; name it with roles (loss=KEY)")
    return result

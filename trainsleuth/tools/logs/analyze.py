"""Analyse a log or run folder: parse, map roles, detect anomalies, extract error lines."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from trainsleuth.tools.findings import SEVERITY_RANK, Finding
from trainsleuth.tools.logs.collect import Collector
from trainsleuth.tools.logs.detect import detect_all
from trainsleuth.tools.logs.errors import ErrorScanner
from trainsleuth.tools.logs.readers import Progress, ReadStats, collect
from trainsleuth.tools.logs.series import DEFAULT_CAPACITY, Series


class SeriesInfo(BaseModel):
    name: str
    role: str
    points: int
    kept_points: int
    first_step: float | None = None
    last_step: float | None = None
    first: float | None = None
    last: float | None = None
    min: float | None = None
    min_step: float | None = None
    max: float | None = None
    max_step: float | None = None
    nonfinite: int | None = None
    segments: int | None = None
    step_source: str | None = None


class SegmentInfo(BaseModel):
    first_step: float
    last_step: float
    points: int


class LogReport(BaseModel):
    path: str
    format: str
    files: list[str] = Field(default_factory=list)
    lines: int = 0
    bytes_read: int = 0
    records: int = 0
    healthy: bool = True
    has_metrics: bool = False
    series: list[SeriesInfo] = Field(default_factory=list)
    roles: dict[str, list[str]] = Field(default_factory=dict)
    segments: list[SegmentInfo] = Field(default_factory=list)
    events: list[Finding] = Field(default_factory=list)
    errors: list[dict[str, Any]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


def _float(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


def analyze(path: Path | str, fmt: str = "auto", *, capacity: int = DEFAULT_CAPACITY,
            progress: Progress | None = None, cancel: threading.Event | None = None) -> LogReport:  # fmt: skip
    """Parse `path` (file or run folder) and report series, events and error lines.

    Raises LogInputError for input that cannot be analysed (binary file, FIFO, permission denied,
    a folder that is not one run, ...)."""
    path = Path(path)
    collector, errors, stats = collect(path, fmt, capacity=capacity, progress=progress, cancel=cancel)
    return build_report(path, collector, errors, stats)


def build_report(path: Path, collector: Collector, errors: ErrorScanner, stats: ReadStats) -> LogReport:
    series = list(collector.series.values())
    report = LogReport(
        path=str(path),
        format=stats.format,
        files=stats.files[:20],
        lines=stats.lines,
        bytes_read=stats.bytes_read,
        records=collector.records,
        has_metrics=bool(series),
    )
    for s in series:
        report.series.append(SeriesInfo(**{k: v for k, v in s.summary().items()}))
        report.roles.setdefault(s.role, []).append(s.name)
    report.notes.extend(stats.notes)
    if stats.long_lines_skipped:
        report.notes.append(f"{stats.long_lines_skipped} lines longer than 1 MiB were skipped")
    if stats.undecodable_lines:
        report.notes.append(f"{stats.undecodable_lines} lines held bytes that are not UTF-8 (replaced)")
    if collector.dropped_series:
        report.notes.append(
            f"more than {len(collector.series)} metric names; ignored e.g. {sorted(collector.dropped_series)[:5]}"
        )
    if collector.position_steps:
        report.notes.append(
            "some records carry no step number; their step is the record's position in the log"
        )
    if not series:
        report.notes.insert(
            0,
            "No metrics found: no line of this log holds a recognisable metric record (loss, lr, grad norm, ...). "
            "Only error lines were looked for.",
        )
    main = _main_series(series)
    if main is not None and len(main.segments) > 1:
        report.segments = [SegmentInfo(**seg.as_dict()) for seg in main.segments[:100]]
        report.notes.append(
            f"steps of {main.name} go backwards {len(main.segments) - 1} time(s) (restarts or pasted excerpts): "
            "read as segments; a step logged again later replaces the earlier record, and records are put in step order"
        )
    events = detect_all(series, errors, collector)
    events.sort(key=lambda f: (-SEVERITY_RANK[f.severity], f.step if f.step is not None else math.inf))
    report.events = events
    report.errors = errors.as_list()
    report.healthy = all(e.severity == "info" for e in events)
    return report


def _main_series(series: list[Series]) -> Series | None:
    for role in ("loss", "loss_component", "val_loss"):
        for s in series:
            if s.role == role:
                return s
    return series[0] if series else None

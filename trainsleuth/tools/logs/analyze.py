"""Analyse a log or run folder: parse, map roles, detect anomalies, extract error lines."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from trainsleuth.tools.findings import SEVERITY_RANK, Finding
from trainsleuth.tools.logs import detect
from trainsleuth.tools.logs.collect import Collector
from trainsleuth.tools.logs.errors import KIND_TEXT, ErrorScanner
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


def detect_all(series: list[Series], errors: ErrorScanner, collector: Collector) -> list[Finding]:
    by_role: dict[str, list[Series]] = {}
    for s in series:
        by_role.setdefault(s.role, []).append(s)
    events: list[Finding] = []
    events += detect.detect_nonfinite(series)
    losses = list(by_role.get("loss", []))
    comps = by_role.get("loss_component", [])
    if not losses and len(comps) == 1 and not by_role.get("reward") and not by_role.get("kl"):
        losses = comps
    loss_spikes = []
    for s in losses:
        la = detect.detect_loss(s)
        events += la.findings
        loss_spikes += la.spikes
    for s in by_role.get("grad_norm", []):
        spikes = detect.detect_grad_norm(s)
        events += detect.grad_findings(s, spikes, loss_spikes)
    for s in series:
        f = detect.detect_constant(s)
        if f:
            events.append(f)
    trains = losses
    for v in by_role.get("val_loss", []):
        if trains:
            f = detect.detect_overfitting(v, trains[0])
            if f:
                events.append(f)
    falls: list[float] = []
    for s in by_role.get("loss_scale", []):
        found, fl = detect.detect_loss_scale(s)
        events += found
        falls += fl
    repeated: list[float] = []
    for g in by_role.get("grad_norm", []):
        repeated += detect.repeated_grad_steps(g)
    if falls:  # a repeated grad norm means a skipped step only in fp16 runs with scale drops
        pass
    else:
        repeated = []
    counters = by_role.get("skipped", []) + by_role.get("nan_iterations", [])
    steps_all = [s.segments[0].first_step for s in series if s.segments]
    last_all = [s.segments[-1].last_step for s in series if s.segments]
    f = detect.detect_skipped(
        counters,
        falls,
        errors.overflow_steps,
        repeated,
        collector.records,
        min(steps_all) if steps_all else None,
        max(last_all) if last_all else None,
    )
    if f:
        events.append(f)
    batch_changes = any(
        len({round(v, 6) for v in s.timeline()[1]}) > 1 for s in by_role.get("batch_size", [])
    )
    for role in ("throughput", "step_time"):
        for s in by_role.get(role, []):
            f = detect.detect_throughput(s, batch_changes)
            if f:
                events.append(f)
    for hit in errors.hits.values():
        sev = "error"
        text = KIND_TEXT.get(hit.kind, hit.kind)
        if hit.kind == "min_loss_scale":
            events.append(
                detect.finding(
                    "loss_scale_collapse",
                    "error",
                    f"The log says the minimum loss scale was reached (line {hit.line_no}).",
                    step=hit.step,
                    evidence_line=hit.line_no,
                    text=hit.text,
                )
            )
        events.append(
            detect.finding(
                "error_message",
                sev,
                f"The log holds a {text} at line {hit.line_no}"
                + (f" ({hit.count} such lines)" if hit.count > 1 else "")
                + f": {hit.exception or hit.text}"[:400],
                step=hit.step,
                kind=hit.kind,
                line=hit.line_no,
                last_line=hit.last_line_no if hit.count > 1 else None,
                count=hit.count,
                text=hit.text,
                exception=hit.exception,
                step_note="the last step logged before this line" if hit.step is not None else None,
            )
        )
    return events

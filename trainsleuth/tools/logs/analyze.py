"""Analyse a log or run folder: read it, settle the roles, detect anomalies, give a verdict.

The verdict is a claim only about what was understood: `healthy` when a loss series was read and
no warning or error was found, `problems` when something was found, `not_understood` when no loss
series was recognised, or the one read has fewer than 5 records and did not halve (then `healthy` is
null: nothing was checked). Every report carries a parse
report saying what was read and how, so a wrong reading can be seen and corrected with `roles`.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from trainsleuth.tools.findings import SEVERITY_RANK, Finding
from trainsleuth.tools.logs.collect import Collector
from trainsleuth.tools.logs.detect import detect_all
from trainsleuth.tools.logs.errors import ErrorScanner
from trainsleuth.tools.logs.infer import Understanding, assign_roles, parse_roles
from trainsleuth.tools.logs.readers import Progress, ReadStats, collect
from trainsleuth.tools.logs.series import DEFAULT_CAPACITY, Series

Verdict = Literal["healthy", "problems", "not_understood"]
ROLE_HELP = (
    "map the keys yourself: --role loss=KEY (CLI) or roles: {loss: KEY} (tools); step=KEY names the step"
)


class SeriesInfo(BaseModel):
    name: str
    role: str
    points: int
    kept_points: int
    first_step: float | None = None
    last_step: float | None = None
    first: float | str | None = Field(default=None, description='"nan"/"inf" when the value is not finite')
    last: float | str | None = None
    min: float | None = None
    min_step: float | None = None
    max: float | None = None
    max_step: float | None = None
    nonfinite: int | None = None
    first_nonfinite_step: float | None = None
    segments: int | None = None
    step_source: str | None = None
    resolution: float | None = None


class SegmentInfo(BaseModel):
    first_step: float
    last_step: float
    points: int


class ParseReport(BaseModel):
    """How the log was read: enough to see a wrong reading and correct it with `roles`."""

    lines: int = 0
    records: int = Field(default=0, description="metric records read (lines matched)")
    skipped: dict[str, int] = Field(default_factory=dict, description="lines read but not used, by why")
    skipped_example: dict[str, str] = Field(default_factory=dict)
    step_source: dict[str, int] = Field(
        default_factory=dict, description="records by where their step came from"
    )
    roles: dict[str, str] = Field(default_factory=dict, description="metric key -> role")
    decided: dict[str, str] = Field(
        default_factory=dict, description="keys whose role did not come from the name alone"
    )
    user_roles: dict[str, str] = Field(
        default_factory=dict, description="the roles given by the user, echoed"
    )
    judged: list[str] = Field(default_factory=list, description="the loss series the verdict is about")
    units: dict[str, str] = Field(default_factory=dict)
    resolution: dict[str, float] = Field(
        default_factory=dict, description="key -> the rounding of its printed values"
    )


class LogReport(BaseModel):
    path: str
    format: str
    files: list[str] = Field(default_factory=list)
    lines: int = 0
    bytes_read: int = 0
    records: int = 0
    verdict: Verdict = "not_understood"
    healthy: bool | None = None
    has_metrics: bool = False
    series: list[SeriesInfo] = Field(default_factory=list)
    roles: dict[str, list[str]] = Field(default_factory=dict)
    segments: list[SegmentInfo] = Field(default_factory=list)
    events: list[Finding] = Field(default_factory=list)
    errors: list[dict[str, Any]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    parse: ParseReport = Field(default_factory=ParseReport)


def analyze(path: Path | str, fmt: str = "auto", *, capacity: int = DEFAULT_CAPACITY,
            progress: Progress | None = None, cancel: threading.Event | None = None,
            roles: list[str] | dict[str, str] | None = None, roots: list[Path] | None = None) -> LogReport:  # fmt: skip
    """Parse `path` (file or run folder) and report series, events, error lines and a verdict.
    `roles`: corrections such as {"loss": "trl", "step": "s"} (or ["loss=trl", "step=s"]).

    Raises LogInputError for input that cannot be analysed (binary file, FIFO, permission denied,
    a folder that is not one run, a role naming a key the log does not have, ...)."""
    path = Path(path)
    user = parse_roles(roles)
    collector, errors, stats = collect(path, fmt, capacity=capacity, progress=progress, cancel=cancel,
                                       roots=roots, step_key=user.get("step"))  # fmt: skip
    return build_report(path, collector, errors, stats, user)


def build_report(path: Path, collector: Collector, errors: ErrorScanner, stats: ReadStats,
                 user: dict[str, str] | None = None) -> LogReport:  # fmt: skip
    user = user or {}
    understanding = assign_roles(collector, user)
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
        report.series.append(SeriesInfo(**s.summary()))
        report.roles.setdefault(s.role, []).append(s.name)
    report.parse = _parse_report(collector, stats, understanding, user)
    report.notes.extend(stats.notes)
    report.notes.extend(understanding.notes)
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
    capped = [s.name for s in series if s.segments_capped]
    if capped:
        report.notes.append(
            f"the steps of {', '.join(capped[:3])} go backwards more than 1000 times (many runs or excerpts "
            "interleaved): the later restarts are not told apart"
        )
    main = _main_series(understanding, series)
    if main is not None and len(main.segments) > 1:
        report.segments = [SegmentInfo(**seg.as_dict()) for seg in main.segments[:100]]
        report.notes.append(
            f"steps of {main.name} go backwards {len(main.segments) - 1} time(s) (restarts or pasted excerpts): "
            "read as segments; a step logged again later replaces the earlier record, and records are put in step order"
        )
    events = detect_all(series, errors, collector, understanding.judged)
    events.sort(key=lambda f: (-SEVERITY_RANK[f.severity], f.step if f.step is not None else math.inf))
    report.events = events
    report.errors = errors.as_list()
    short = _too_short(understanding)
    if any(e.severity != "info" for e in events):
        report.verdict, report.healthy = "problems", False
    elif short:
        # A loss read right but too short to show a trend: "healthy" would be a claim nothing supports.
        report.verdict, report.healthy = "not_understood", None
        report.notes.insert(0, f"Too short to judge: {short}. Nothing was judged; pass a longer log.")
    elif understanding.understood:
        report.verdict, report.healthy = "healthy", True
    else:
        report.verdict, report.healthy = "not_understood", None
        report.notes.insert(
            0, "Not understood: " + "; ".join(understanding.reasons) + f". Nothing was judged: {ROLE_HELP}."
        )
    return report


MIN_JUDGED_RECORDS = 5  # fewer records than this show no trend: no spike, plateau or divergence rule applies


def _too_short(understanding: Understanding) -> str | None:
    """Why the judged loss is too short for a verdict, or None."""
    if not understanding.judged:
        return None
    s = understanding.judged[0]
    vals = [v for v in s.timeline()[1] if math.isfinite(v)]
    if len(vals) >= MIN_JUDGED_RECORDS:
        return None
    if len(vals) >= 2 and vals[0] > 0 and vals[-1] < 0.5 * vals[0]:
        return None  # few records, but a loss that more than halved did learn (a ppl from 4998 to 1.8)
    return (
        f"{s.name} has {len(vals)} finite record(s) and does not fall by half; the rules need "
        f"{MIN_JUDGED_RECORDS} or more"
    )


def _main_series(understanding: Understanding, series: list[Series]) -> Series | None:
    if understanding.judged:
        return understanding.judged[0]
    return series[0] if series else None


def _parse_report(collector: Collector, stats: ReadStats, understanding: Understanding,
                  user: dict[str, str]) -> ParseReport:  # fmt: skip
    names = list(collector.series)
    keep = set(names[:40]) | {s.name for s in understanding.judged} | set(understanding.how)
    return ParseReport(
        lines=stats.lines,
        records=collector.records,
        skipped=dict(stats.skipped.most_common()),
        skipped_example=stats.skipped_example,
        step_source=dict(collector.step_sources.most_common(8)),
        roles={n: collector.series[n].role for n in names if n in keep},
        decided=understanding.how,
        user_roles=user,
        judged=[s.name for s in understanding.judged],
        units={k: v for k, v in collector.units.items() if k in keep},
        resolution={n: s.resolution for n, s in collector.series.items() if n in keep and s.resolution},
    )

"""Training-log tools (issue 4): `analyze_training_log` and `extract_metrics`."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field, field_validator

from trainsleuth.server.registry import (
    AnalysisInput,
    AnalysisOutput,
    ReadPath,
    ToolCall,
    ToolFailure,
    ToolRegistry,
    paginate,
)
from trainsleuth.tools.findings import Finding

ISSUE = 4

FormatName = Literal[
    "auto", "jsonl", "csv", "tsv", "hf_dict", "trainer_state", "keyvalue", "megatron", "nanogpt", "tqdm",
    "tensorboard", "mlflow", "markdown",
]  # fmt: skip


def _known_format(value: str) -> str:
    """A log format name (a plain string in the schema, to keep tools/list within budget)."""
    if value not in get_args(FormatName):
        from pydantic_core import PydanticCustomError

        choices = ", ".join(f'"{name}"' for name in get_args(FormatName))
        raise PydanticCustomError("format_name", "must be one of {choices}", {"choices": choices})
    return value


class AnalyzeLogInput(AnalysisInput):
    path: ReadPath
    format: str = "auto"  # a FormatName; a plain string keeps tools/list within budget
    roles: dict[str, str] | None = None
    plot: bool = False
    min_severity: Literal["info", "warning", "error"] = "info"
    cursor: str | None = None
    limit: int = Field(default=50, ge=1, le=500)

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        return _known_format(value)


class AnalyzeLogOutput(AnalysisOutput):
    path: str
    format: str
    verdict: str = Field(description="healthy | problems | not_understood (then healthy is null)")
    healthy: bool | None
    has_metrics: bool
    lines: int
    records: int
    series: list[dict[str, Any]]
    roles: dict[str, list[str]]
    segments: list[dict[str, Any]] = Field(default_factory=list)
    events: list[Finding]
    total_events: int
    next_cursor: str | None = None
    errors: list[dict[str, Any]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    parse: dict[str, Any] = Field(
        default_factory=dict, description="how the log was read (keys -> roles, skips, steps)"
    )

    def render_text(self) -> str:
        from trainsleuth.tools.logs.render import verdict_line

        lines = [f"{self.path}: {self.format}, {self.records} records, {len(self.series)} metrics: "
                 f"{verdict_line(self.verdict, self.parse.get('judged', []))}."]  # fmt: skip
        lines += [f"Note: {n}" for n in self.notes]
        if self.roles:
            lines.append(
                "Roles: " + "; ".join(f"{r}: {', '.join(n[:3])}" for r, n in sorted(self.roles.items()))
            )
        skipped = self.parse.get("skipped") or {}
        if skipped:
            lines.append("Skipped lines: " + "; ".join(f"{n} {why}" for why, n in skipped.items()))
        if self.events:
            lines.append(f"Events ({len(self.events)} of {self.total_events}):")
            lines += [f"- {e.one_line()}" for e in self.events]
        else:
            lines.append("No events.")
        if self.next_cursor:
            lines.append(f"More events: call again with cursor={self.next_cursor}")
        return "\n".join(lines)

    def evidence_summary(self) -> str:
        worst = [e for e in self.events if e.severity != "info"][:3]
        head = f"analyze_training_log {self.path}: {self.verdict}"
        return (head + "; " + "; ".join(e.one_line() for e in worst))[:300]


class ExtractInput(AnalysisInput):
    path: ReadPath
    metrics: list[str] = Field(
        default_factory=list,
        description="Names or roles (loss, lr...).",
        max_length=50,
    )
    max_points: int = Field(default=500, ge=2, le=5000)
    step_min: float | None = None
    step_max: float | None = None
    format: str = "auto"  # as for analyze_training_log; a plain string keeps tools/list within budget
    roles: dict[str, str] | None = None
    cursor: str | None = None
    limit: int = Field(default=10, ge=1, le=50)

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        return _known_format(value)


class ExtractOutput(AnalysisOutput):
    path: str
    format: str
    series: list[dict[str, Any]]
    total_series: int
    next_cursor: str | None = None
    available: dict[str, str]
    missing: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def render_text(self) -> str:
        lines = [f"{self.path}: {self.format}; {self.total_series} series extracted."]
        lines += [f"Note: {n}" for n in self.notes]
        for s in self.series:
            vals = [v for v in s["values"] if isinstance(v, (int, float))]
            rng = f"min {min(vals):.6g}, max {max(vals):.6g}" if vals else "no finite values in range"
            bad = (
                f", {s['nonfinite']} NaN/Inf from step {s['first_nonfinite_step']}"
                if s.get("nonfinite")
                else ""
            )
            lines.append(
                f"- {s['name']} ({s['role']}): {len(s['values'])} of {s['points_in_log']} points, {rng}{bad}"
            )
        if self.next_cursor:
            lines.append(f"More series: call again with cursor={self.next_cursor}")
        return "\n".join(lines)


def analyze_handler(args: AnalyzeLogInput, call: ToolCall) -> AnalyzeLogOutput:
    from pathlib import Path

    from trainsleuth.tools.findings import SEVERITY_RANK
    from trainsleuth.tools.logs import LogInputError
    from trainsleuth.tools.logs.analyze import build_report, collect
    from trainsleuth.tools.logs.infer import parse_roles

    def progress(done: int, total: int, msg: str) -> None:
        call.progress(done, total, msg)

    path = Path(args.path)
    try:
        user = parse_roles(args.roles)
        collector, errors, stats = collect(path, args.format, progress=progress, cancel=call.cancel_event,
                                           roots=_roots(call, path), step_key=user.get("step"))  # fmt: skip
        report = build_report(path, collector, errors, stats, user)
    except LogInputError as exc:
        raise ToolFailure(exc.message, exc.next_step) from None
    floor = SEVERITY_RANK[args.min_severity]
    events = [e for e in report.events if SEVERITY_RANK[e.severity] >= floor]
    page, nxt = paginate(events, args.cursor, args.limit)
    if args.plot:
        from trainsleuth.tools.extras import MissingExtra
        from trainsleuth.tools.logs.plot import render_png

        try:
            png = render_png(collector, report.events)
        except MissingExtra as exc:
            report.notes.append(f"no plot: {exc.message}")
            png = b""
        if png is None:
            report.notes.append("no plot: the log has no metric series to draw")
        elif png:
            call.add_image(png)
    return AnalyzeLogOutput(
        path=report.path,
        format=report.format,
        verdict=report.verdict,
        healthy=report.healthy,
        has_metrics=report.has_metrics,
        lines=report.lines,
        records=report.records,
        series=[s.model_dump(exclude_none=True) for s in report.series[:100]],
        roles={k: v[:20] for k, v in report.roles.items()},
        segments=[s.model_dump() for s in report.segments[:20]],
        events=page,
        total_events=len(events),
        next_cursor=nxt,
        errors=report.errors[:20],
        notes=report.notes
        + ([f"{len(report.series) - 100} more series not listed"] if len(report.series) > 100 else []),
        parse=report.parse.model_dump(exclude_defaults=True),
    )


def _roots(call: ToolCall, path: Any) -> list[Any]:
    """Where symlinks inside a run folder may lead: the workspaces and the folder analysed."""
    return [*call.ctx.policy.workspaces, path]


def extract_handler(args: ExtractInput, call: ToolCall) -> ExtractOutput:
    from pathlib import Path

    from trainsleuth.tools.logs import LogInputError, extract

    try:
        res = extract(
            Path(args.path),
            args.metrics,
            max_points=args.max_points,
            step_min=args.step_min,
            step_max=args.step_max,
            fmt=args.format,
            progress=lambda d, t, m: call.progress(d, t, m),
            cancel=call.cancel_event,
            roles=args.roles,
            roots=_roots(call, Path(args.path)),
        )
    except LogInputError as exc:
        raise ToolFailure(exc.message, exc.next_step) from None
    page, nxt = paginate([s.model_dump() for s in res.series], args.cursor, args.limit)
    available = dict(list(res.available.items())[:200])
    return ExtractOutput(
        path=res.path,
        format=res.format,
        series=page,
        total_series=len(res.series),
        next_cursor=nxt,
        available=available,
        missing=res.missing,
        notes=res.notes,
    )


def register(registry: ToolRegistry) -> None:
    registry.add(
        "analyze_training_log",
        analyze_handler,
        input_model=AnalyzeLogInput,
        output_model=AnalyzeLogOutput,
        description="Investigating: any training log or run folder; spikes, NaNs, plateaus, errors.",
        title="Analyze training log",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
    )
    registry.add(
        "extract_metrics",
        extract_handler,
        input_model=ExtractInput,
        output_model=ExtractOutput,
        description="Comparing runs: metric series from a log, spikes kept.",
        title="Extract metrics",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
    )

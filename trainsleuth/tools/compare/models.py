"""What `compare_runs` answers: the report model and its text rendering."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from trainsleuth.tools.compare.band import Curve, MetricResult
from trainsleuth.tools.findings import Finding

Verdict = Literal["diverged", "parted", "within_noise", "identical", "not_comparable"]


class MetricComparison(BaseModel):
    metric: str = Field(description="name in the run under test")
    good_metric: str = Field(description="name in the good run")
    role: str
    status: str = Field(description="diverged | within_noise | identical | not_compared")
    first_step: float | None = None
    direction: str | None = Field(default=None, description="higher | lower | nonfinite")
    good_value: float | None = None
    bad_value: float | str | None = None
    band: list[float] | None = Field(default=None, description="[low, high] of the good run's band there")
    compared: int = 0
    outside: int = 0
    identical_until: float | None = None
    parts_at: float | None = None
    note: str | None = None

    def line(self) -> str:
        head = f"{self.metric} ({self.role})"
        if self.status == "diverged":
            val = self.bad_value if isinstance(self.bad_value, str) else f"{self.bad_value:.6g}"
            band = f", band [{self.band[0]:.6g}, {self.band[1]:.6g}]" if self.band else ""
            return (
                f"{head}: leaves the band at step {self.first_step:g} ({self.direction}: {val} vs good "
                f"{self.good_value:.6g}{band}); {self.outside} of {self.compared} points outside"
            )
        if self.status == "not_compared":
            return f"{head}: not compared ({self.note})"
        extra = f"; {self.note}" if self.note else ""
        return f"{head}: {self.status.replace('_', ' ')} over {self.compared} points{extra}"


class DifferenceOut(BaseModel):
    item: str
    kind: str
    good: Any = None
    bad: Any = None
    absent: str | None = Field(default=None, description="the run that does not record it: good | bad")
    category: str
    score: float
    why: str = ""
    failure_modes: list[str] = Field(default_factory=list)

    def line(self) -> str:
        good = "(absent)" if self.absent == "good" else _short(self.good)
        bad = "(absent)" if self.absent == "bad" else _short(self.bad)
        return f"{self.item}: {good} -> {bad} [{self.category}] {self.why}".rstrip()


class Suggestion(BaseModel):
    id: str
    title: str
    pointer: str
    why: str


class BisectOffer(BaseModel):
    tool: str = Field(description="bisect_commits or bisect_versions")
    arguments: dict[str, Any] = Field(description="the call to make once the person approved the reproducer")
    reproducer: str | None = Field(default=None, description="path of the generated reproducer script")
    reason: str
    approval: str = "Show the reproducer to the person and call the bisect only once they approve it (like any reproducer)."
    missing: str | None = Field(default=None, description="what to pass to compare_runs to get a reproducer")


class CompareReport(BaseModel):
    good: str
    bad: str
    more_good: list[str] = Field(default_factory=list)
    verdict: Verdict
    summary: str
    first_divergence: MetricComparison | None = None
    order: list[str] = Field(default_factory=list, description="metric@step in the order they leave the band")
    metrics: list[MetricComparison] = Field(default_factory=list)
    restart_steps: list[float] = Field(
        default_factory=list, description="where the run under test's log restarts"
    )
    differences: list[DifferenceOut] = Field(default_factory=list)
    bookkeeping_differences: int = 0
    events_only_in_bad: list[str] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    suggestions: list[Suggestion] = Field(default_factory=list)
    bisect: BisectOffer | None = None
    notes: list[str] = Field(default_factory=list)


@dataclass
class CompareResult:
    report: CompareReport
    plot_pairs: list[tuple[MetricResult, list[Curve], Curve]] = field(default_factory=list)


def _short(v: Any) -> str:
    text = repr(v) if isinstance(v, str) else str(v)
    return text if len(text) <= 60 else text[:57] + "..."


def render_text(report: CompareReport, limit_metrics: int = 12) -> str:
    lines = [f"compare_runs: {report.verdict.replace('_', ' ')}. {report.summary}"]
    lines.append(f"good: {report.good}" + (f" (+{len(report.more_good)} more)" if report.more_good else ""))
    lines.append(f"under test: {report.bad}")
    if report.restart_steps:
        lines.append(
            "the run under test's log restarts at step(s) "
            + ", ".join(f"{s:g}" for s in report.restart_steps)
        )
    lines.append("Metrics:")
    lines += [f"- {m.line()}" for m in report.metrics[:limit_metrics]]
    if len(report.metrics) > limit_metrics:
        lines.append(f"- ... {len(report.metrics) - limit_metrics} more (structured output)")
    if report.events_only_in_bad:
        lines.append("Events only in the run under test: " + ", ".join(report.events_only_in_bad))
    if report.differences:
        lines.append(
            f"Differences, most likely cause first ({report.bookkeeping_differences} bookkeeping ones left out):"
        )
        lines += [f"- {d.line()}" for d in report.differences[:10]]
    if report.suggestions:
        lines.append(
            "Failure modes to read: " + "; ".join(f"{s.id} ({s.pointer})" for s in report.suggestions)
        )
    if report.bisect:
        b = report.bisect
        lines.append(
            f"Bisect offer: {b.tool}({', '.join(f'{k}={v!r}' for k, v in b.arguments.items())}). {b.reason}."
        )
        if b.reproducer:
            lines.append(f"Reproducer: {b.reproducer}. {b.approval}")
        if b.missing:
            lines.append(f"To get a reproducer, pass {b.missing}.")
    lines += [f"Note: {n}" for n in report.notes]
    return "\n".join(lines)

"""trace_diff (issue 29): the first call or tensor that differs between a good and a bad variant.

MCP wiring only: the work is in `trainsleuth.tools.trace`. Long-running (it runs the user's command
three times): a job in a process of its own, worktrees and run folders registered for clean-up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from trainsleuth.server.registry import (
    AnalysisInput,
    AnalysisOutput,
    GitRef,
    ToolCall,
    ToolFailure,
    ToolRegistry,
    WorkspacePath,
)
from trainsleuth.tools.findings import Finding

ISSUE = 29


class TraceDiffInput(AnalysisInput):
    command: str | None = Field(default=None, description="At rev_a (good) and rev_b.")
    rev_a: GitRef | None = None
    rev_b: GitRef | None = None
    command_a: str | None = None
    command_b: str | None = None
    python: str | None = None
    python_b: str | None = None  # b's interpreter when it is not python's
    steps: int = Field(default=5, ge=1, le=50)
    cwd: WorkspacePath | None = None
    timeout_s: float = Field(default=600.0, ge=10, le=7200)


class TraceDiffOutput(AnalysisOutput):
    verdict: str = Field(description="differs | within_noise | identical")
    summary: str
    first_difference: dict[str, Any] | None = None
    differences: list[dict[str, Any]] = Field(default_factory=list)
    invariants: list[dict[str, Any]] = Field(default_factory=list)
    noise: dict[str, Any] = Field(default_factory=dict)
    variants: list[dict[str, Any]] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    text: str = Field(default="", exclude=True)

    def render_text(self) -> str:
        return self.text or self.summary

    def evidence_summary(self) -> str:
        return f"trace_diff: {self.verdict}. {self.summary}"[:300]


def trace_diff(args: TraceDiffInput, call: ToolCall) -> TraceDiffOutput:
    from trainsleuth.tools.trace import Reporter, TraceDiffError, plan_trace_diff, render_text, run_trace_diff

    python_a = call.ctx.interpreter(args.python)
    python_b = call.ctx.interpreter(args.python_b) if args.python_b else None
    try:
        plan = plan_trace_diff(
            workspace=call.ctx.workspace,
            cwd=Path(args.cwd) if args.cwd else None,
            command=args.command,
            rev_a=args.rev_a,
            rev_b=args.rev_b,
            command_a=args.command_a,
            command_b=args.command_b,
            python_a=python_a,
            python_b=python_b,
            steps=args.steps,
            timeout_s=args.timeout_s,
        )
        reporter: Any = call.job
        if reporter is None:
            reporter = Reporter(call.cancel_event, lambda d, t, m: call.progress(d, t, m))
        report = run_trace_diff(plan, reporter)
    except TraceDiffError as exc:
        message = exc.message + (f"\n{exc.detail[-1500:]}" if exc.detail else "")
        raise ToolFailure(message, exc.next_step) from None
    return TraceDiffOutput(
        verdict=report.verdict,
        summary=report.summary,
        first_difference=report.first_difference.model_dump() if report.first_difference else None,
        differences=[d.model_dump() for d in report.differences],
        invariants=[x.model_dump() for x in report.invariants],
        noise=report.noise.model_dump(),
        variants=[v.model_dump() for v in report.variants],
        findings=report.findings,
        notes=report.notes,
        text=render_text(report),
    )


def register(registry: ToolRegistry) -> None:
    registry.add(
        "trace_diff",
        trace_diff,
        input_model=TraceDiffInput,
        output_model=TraceDiffOutput,
        description="Good vs bad run (2 revs, commands or envs): first call or tensor that differs.",
        title="Trace diff",
        read_only=False,
        destructive=True,  # runs the user's code
        idempotent=False,
        open_world=False,
        long_running=True,
    )

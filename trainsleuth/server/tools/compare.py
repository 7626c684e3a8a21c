"""Compare-with-what-works tools (issue 20): `compare_runs` and `check_resume`.

MCP wiring only: the work is in `trainsleuth.tools.compare`. Both may take a while (check_resume
runs user code in two processes): they report progress and honour cancellation.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from pydantic import Field

from trainsleuth.server.registry import (
    AnalysisInput,
    AnalysisOutput,
    Entrypoint,
    GitRef,
    ReadPath,
    ToolCall,
    ToolFailure,
    ToolRegistry,
)
from trainsleuth.tools.findings import Finding

ISSUE = 20


class CompareRunsInput(AnalysisInput):
    good: ReadPath = Field(description="Log, run folder or probe report.")
    bad: ReadPath
    more_good: list[ReadPath] = Field(default_factory=list, max_length=10)  # other good seeds
    metrics: list[str] = Field(default_factory=list, max_length=20)
    good_ref: GitRef | None = Field(default=None, description="Commit or pkg==version.")
    bad_ref: GitRef | None = None  # as good_ref
    train_command: str | None = Field(default=None, max_length=2000, description="Writes the log to {log}.")
    plot: bool = Field(default=True)


class CompareRunsOutput(AnalysisOutput):
    verdict: str = Field(description="diverged | parted | within_noise | identical | not_comparable")
    summary: str
    first_divergence: dict[str, Any] | None = None
    order: list[str] = Field(default_factory=list)
    metrics: list[dict[str, Any]] = Field(default_factory=list)
    restart_steps: list[float] = Field(default_factory=list)
    differences: list[dict[str, Any]] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    suggestions: list[dict[str, Any]] = Field(default_factory=list)
    bisect: dict[str, Any] | None = None
    notes: list[str] = Field(default_factory=list)
    text: str = Field(default="", exclude=True)

    def render_text(self) -> str:
        return self.text or self.summary

    def evidence_summary(self) -> str:
        return f"compare_runs: {self.verdict}. {self.summary}"[:300]


class CheckResumeInput(AnalysisInput):
    entrypoint: Entrypoint = Field(description="Probe mapping + save(path), load(path)")
    steps_before: int = Field(default=4, ge=1, le=1000)
    steps_after: int = Field(default=4, ge=1, le=1000)
    python: str | None = None
    timeout_s: float = Field(default=300.0, ge=1, le=3600)


class CheckResumeOutput(AnalysisOutput):
    verdict: str = Field(description="restored | not_restored | unexplained | nondeterministic")
    healthy: bool
    mode: str
    not_restored: list[dict[str, Any]] = Field(default_factory=list)
    first_divergence: str | None = None
    steps: list[dict[str, Any]] = Field(default_factory=list)
    untested: list[str] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    text: str = Field(default="", exclude=True)

    def render_text(self) -> str:
        return self.text or self.verdict

    def evidence_summary(self) -> str:
        pieces = ", ".join(i["piece"] for i in self.not_restored) or "nothing missing"
        return f"check_resume: {self.verdict} ({pieces})"[:300]


def _git_root(path: Path, call: ToolCall) -> Path:
    """The git repository the run under test lives in (inside a workspace), else the workspace."""
    folder = path if path.is_dir() else path.parent
    try:
        proc = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return call.ctx.workspace
    root = Path(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip() else None
    if root is not None and call.ctx.policy.contains(root):
        return root
    return call.ctx.workspace


def _check_ref(repo: Path, ref: str) -> bool:
    try:
        proc = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
            capture_output=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def compare_runs_handler(args: CompareRunsInput, call: ToolCall) -> CompareRunsOutput:
    from trainsleuth.knowledge.relevance import for_workspace
    from trainsleuth.tools.compare.bisect_offer import package_change
    from trainsleuth.tools.compare.plot import render_png
    from trainsleuth.tools.compare.report import compare_runs, render_text
    from trainsleuth.tools.compare.runs import RunInputError

    workspace = call.ctx.workspace
    repo = _git_root(Path(args.bad), call)
    notes: list[str] = []
    refs = [r for r in (args.good_ref, args.bad_ref) if r]
    if len(refs) == 1:
        raise ToolFailure(
            "give both good_ref and bad_ref, or neither",
            "pass the good run's commit and the run under test's",
        )
    if refs and package_change(args.good_ref, args.bad_ref) is None:
        unknown = [r for r in refs if not _check_ref(repo, r)]
        if unknown:
            raise ToolFailure(
                f"{', '.join(unknown)} is not a commit of the git repository at {repo}",
                "pass commits (or refs) of the workspace's repository, or package==version for both runs",
            )

    try:
        result = compare_runs(
            Path(args.good),
            Path(args.bad),
            more_good=[Path(p) for p in args.more_good],
            metrics=args.metrics,
            good_ref=args.good_ref,
            bad_ref=args.bad_ref,
            train_command=args.train_command,
            repo=repo,
            workspace=workspace,
            relevance=for_workspace(workspace),
            progress=lambda d, t, m: call.progress(d, t, m),
            cancel=call.cancel_event,
        )
    except RunInputError as exc:
        raise ToolFailure(exc.message, exc.next_step) from None
    report = result.report
    if args.plot:
        png = render_png(result.plot_pairs, report.first_divergence.first_step if report.first_divergence else None,
                         ("good", "under test"))  # fmt: skip
        if png is None:
            notes.append("no plot: no metric was compared")
        else:
            call.add_image(png)
    report.notes += notes
    return CompareRunsOutput(
        verdict=report.verdict,
        summary=report.summary,
        first_divergence=report.first_divergence.model_dump() if report.first_divergence else None,
        order=report.order,
        metrics=[m.model_dump(exclude_none=True) for m in report.metrics[:40]],
        restart_steps=report.restart_steps,
        differences=[d.model_dump() for d in report.differences[:20]],
        findings=report.findings,
        suggestions=[s.model_dump() for s in report.suggestions],
        bisect=report.bisect.model_dump(exclude_none=True) if report.bisect else None,
        notes=report.notes,
        text=render_text(report),
    )


def check_resume_handler(args: CheckResumeInput, call: ToolCall) -> CheckResumeOutput:
    from trainsleuth.tools.compare.resume import ResumeError, check_resume, render_resume

    python = call.ctx.interpreter(args.python)
    try:
        report = check_resume(
            args.entrypoint,
            python=python,
            cwd=call.ctx.workspace,
            steps_before=args.steps_before,
            steps_after=args.steps_after,
            timeout_s=args.timeout_s,
            cancel_event=call.cancel_event,
            progress=lambda d, t, m: call.progress(d, t, m),
        )
    except ResumeError as exc:
        message = exc.message
        if exc.detail and exc.kind not in ("timeout", "cancelled"):
            message += "\n" + exc.detail[-1500:]
        raise ToolFailure(message, exc.next_step) from None
    return CheckResumeOutput(
        verdict=report.verdict,
        healthy=report.healthy,
        mode=report.mode,
        not_restored=[n.model_dump() for n in report.not_restored],
        first_divergence=report.first_divergence,
        steps=[s.model_dump() for s in report.steps],
        untested=report.untested,
        findings=report.findings,
        notes=report.notes,
        text=render_resume(report),
    )


def register(registry: ToolRegistry) -> None:
    registry.add(
        "compare_runs",
        compare_runs_handler,
        input_model=CompareRunsInput,
        output_model=CompareRunsOutput,
        description="Comparing with what works: first metric and step off a good run's noise.",
        title="Compare runs",
        read_only=False,  # writes the offered reproducer under .trainsleuth/scratch/
        destructive=False,
        idempotent=True,
        open_world=False,
    )
    registry.add(
        "check_resume",
        check_resume_handler,
        input_model=CheckResumeInput,
        output_model=CheckResumeOutput,
        description="Comparing with what works: save, restore, continue training; what was lost.",
        title="Check resume",
        read_only=False,
        destructive=True,  # runs the user's code
        idempotent=False,
        open_world=False,
        long_running=True,
    )

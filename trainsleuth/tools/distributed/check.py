"""`check_distributed`: run entrypoints on N ranks and compare the ranks with each other and with
one process computing the same global batch.

The work happens in `runners/dist_runner.py` inside the user's interpreter; this module launches
it, reads what the ranks left in the run's folder (Flight Recorder dumps, stacks, logs) and turns
it into findings: `divergence.py` for what differs across ranks and from when, `failure.py` and
`flight.py` for a job that crashed or hung. Several entrypoints can share one launch (the ranks
start once and check them in turn), which is how the tests keep many patterns cheap.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from trainsleuth.tools.distributed import divergence as dv
from trainsleuth.tools.distributed.errors import AnalysisError, from_runner_error
from trainsleuth.tools.distributed.failure import (
    RankState,
    failure_findings,
    rank_states,
    read_flight_recorder,
)
from trainsleuth.tools.distributed.flight import FlightRecorderReport
from trainsleuth.tools.findings import Finding, is_healthy
from trainsleuth.tools.runners.launch import RunnerError, run_runner

ENTRYPOINT_ERRORS = {
    "bad_entrypoint",
    "entrypoint_not_found",
    "function_not_found",
    "import_error",
    "entrypoint_raised",
    "contract_error",
}


class Difference(BaseModel):
    """One tensor that differs across ranks (or from the single-process replay)."""

    name: str
    kind: str = Field(
        description="parameter, frozen parameter, buffer, outside (state outside the model), input, gradient, "
        "single-process gradient"
    )
    phase: str = Field(
        description="before_wrap, forward_entry, after_backward, after_last_step or single_process; for a "
        "command: first_use (a module's first call, right after init/wrapping) or after_step"
    )
    step: int | None = None
    rank: int | None = Field(default=None, description="the rank farthest from rank 0")
    ranks: list[int] = Field(default_factory=list, description="every rank that differs from rank 0")
    max_abs_diff: float | str | None = None
    rel_diff: float | str | None = None


class ObservedRank(BaseModel):
    """One process of an observed command, as the launcher placed it."""

    rank: int
    node: int = 0
    local_rank: int = 0
    hostname: str = ""
    pid: int = 0
    reason: str | None = Field(
        default=None, description="steps_done, script_ended, exception or none (killed)"
    )
    steps: list[int] = Field(default_factory=list, description="observed iterations it finished")
    losses: list[float | str | None] = Field(default_factory=list)
    modules: list[str] = Field(
        default_factory=list, description="the modules compared, as the code names them"
    )
    error: str | None = None


class DistributedReport(BaseModel):
    entrypoint: str
    command: str | None = Field(default=None, description="the user's own command, when it was observed")
    healthy: bool
    completed: bool = Field(
        default=True, description="false when the job crashed or hung before the case ended"
    )
    world_size: int
    backend: str | None = None
    wrapper: str | None = None
    wrappers: list[str] = Field(default_factory=list, description="every DDP / FSDP found, with its settings")
    sharding: str | None = None
    steps_taken: int = 0
    first_divergence: str | None = Field(
        default=None, description="the earliest tensor seen to differ, and when"
    )
    losses_by_step: list[list[float]] = Field(default_factory=list, description="per step, one loss per rank")
    single_process: dict[str, Any] | None = None
    differences: list[Difference] = Field(default_factory=list)
    unused_parameters: dict[str, list[str]] = Field(
        default_factory=dict, description="rank -> parameters with requires_grad=True that got no gradient"
    )
    frozen_parameters: list[str] = Field(default_factory=list)
    outside_state: list[str] = Field(
        default_factory=list,
        description="state compared outside the model (closures, 'state', plain attributes)",
    )
    per_rank_by_design: list[str] = Field(
        default_factory=list, description="tensors that differ across ranks by design, and why (not judged)"
    )
    processes: list[ObservedRank] = Field(default_factory=list, description="each rank, by node and rank")
    step_errors: dict[str, str] = Field(default_factory=dict)
    ranks: list[RankState] = Field(
        default_factory=list, description="every rank, when the job crashed or hung"
    )
    flight_recorder: FlightRecorderReport | None = None
    findings: list[Finding] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    interpreter: str = ""
    duration_s: float = 0.0

    def render_text(self) -> str:
        state = "HEALTHY" if self.healthy else "PROBLEMS FOUND"
        if not self.completed:
            state += " (the job did not finish)"
        lines = [
            f"check_distributed {self.command or self.entrypoint}: {state} ({self.world_size} ranks, "
            f"{self.backend}, {self.steps_taken} step(s), {self.duration_s:.1f}s)",
            f"wrapper: {self.wrapper}" + (f"; {self.sharding}" if self.sharding else ""),
        ]
        lines.extend(f"  {w}" for w in self.wrappers)
        for p in self.processes:
            lines.append(
                f"  node {p.node} rank {p.rank} (local {p.local_rank}, {p.hostname} pid {p.pid}): {p.reason}, "
                f"steps {p.steps[:1] + (['..', p.steps[-1]] if len(p.steps) > 1 else [])}, losses "
                f"{[_short_float(x) for x in p.losses[:4]]}" + (f"; {p.error[:200]}" if p.error else "")
            )
        if self.outside_state:
            lines.append(f"also compared outside the model: {', '.join(self.outside_state[:10])}")
        if self.per_rank_by_design:
            lines.append(f"differ by design (not judged): {'; '.join(self.per_rank_by_design[:6])}")
        if self.first_divergence:
            lines.append(f"first divergence: {self.first_divergence}")
        if self.single_process:
            sp = self.single_process
            lines.append(
                f"single process vs {self.world_size} ranks, step 1: loss {sp.get('loss_single')} vs "
                f"{sp.get('loss_multi')} (rel diff {sp.get('loss_rel_diff')}); "
                f"{len(sp.get('grad_mismatches') or [])} of {sp.get('grads_compared')} gradients beyond rtol "
                f"{sp.get('rtol')}"
            )
        lines.extend(f.one_line() for f in self.findings)
        if self.differences:
            lines.append("differences (first 15):")
            for d in self.differences[:15]:
                who = f" ranks {d.ranks}" if d.ranks else ""
                lines.append(
                    f"  {d.kind} {d.name} [{d.phase}, step {d.step}]{who}: max|Δ| {d.max_abs_diff}, rel {d.rel_diff}"
                )
        for rank, err in self.step_errors.items():
            lines.append(f"rank {rank} failed: {err[:400]}")
        if self.ranks:
            lines.append("ranks (stacks and Flight Recorder side by side):")
            for s in self.ranks:
                where = (
                    f"waits in {s.collective} at {s.where}" if s.collective else f"in {s.where or s.phase}"
                )
                lines.append(
                    f"  rank {s.rank}: {s.status}{' (' + s.exit + ')' if s.exit else ''}, step {s.step}, {where} "
                    f"[{s.stack_source or 'no stack'}] | Flight Recorder: {s.flight_recorder or 'no record'}"
                )
                if s.error:
                    lines.append(f"    error: {s.error[:300]}")
                lines.extend(f"    {frame}" for frame in s.stack[:8])
                if s.status in ("failed", "crashed") and s.log_tail:
                    lines.append("    log tail:")
                    lines.extend(f"      {line}" for line in s.log_tail.strip().splitlines()[-12:])
        if self.flight_recorder and self.flight_recorder.problem:
            lines.append(f"Flight Recorder: {self.flight_recorder.problem.message}")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


def _short_float(x: Any) -> Any:
    return round(x, 5) if isinstance(x, float) else x


def _f(x: Any) -> float | str | None:
    return x if isinstance(x, (int, float, str)) or x is None else str(x)


def describe_wrapper(w: dict[str, Any]) -> str:
    if w.get("kind") != "DDP":
        return f"{w.get('kind')}({w.get('module')})"
    text = (
        f"DDP({w.get('module')}): find_unused_parameters={w.get('find_unused_parameters')}, "
        f"static_graph={w.get('static_graph')}, broadcast_buffers={w.get('broadcast_buffers')}"
    )
    if w.get("frozen_after_wrapping"):
        text += f", frozen after wrapping: {', '.join(w['frozen_after_wrapping'][:5])}"
    return text


def case_report(summary: dict[str, Any], entrypoint: str, world: int) -> DistributedReport:
    """The findings of one case from the summary rank 0 wrote for it."""
    report = DistributedReport(
        entrypoint=entrypoint,
        healthy=True,
        world_size=world,
        backend=summary.get("backend"),
        wrapper=summary.get("wrapper"),
        wrappers=[describe_wrapper(w) for w in summary.get("wrappers") or []],
        sharding=summary.get("sharding"),
        steps_taken=int(summary.get("steps_taken") or len(summary.get("losses") or [])),
        losses_by_step=summary.get("losses") or [],
        single_process=summary.get("single_process"),
        frozen_parameters=list(summary.get("frozen_params") or []),
        outside_state=list(summary.get("outside_state") or []),
        notes=list(summary.get("notes") or []),
    )
    for rank, err in (summary.get("step_errors") or {}).items():
        report.step_errors[str(rank)] = str(err.get("message", err) if isinstance(err, dict) else err)
    for rank, err in (summary.get("case_errors") or {}).items():
        report.step_errors.setdefault(str(rank), f"in {err.get('phase')}: {err.get('message')}")
    findings, differences, first = dv.divergence_findings(summary)
    report.first_divergence = first
    unused, remaining = dv.unused_findings(summary, report.step_errors)
    report.unused_parameters = remaining
    loss, sp_differences = dv.loss_findings(summary, world)
    grads_differ = any(d["kind"] == "gradient" for d in differences)
    no_sync = dv.no_sync_findings(summary, grads_differ)
    explained = any(f.code == "no_gradient" and f.severity == "error" for f in unused)
    steps, step_notes = dv.step_error_findings(report.step_errors, explained)
    report.notes.extend(step_notes)
    report.differences = [
        Difference(**{**d, "max_abs_diff": _f(d.get("max_abs_diff")), "rel_diff": _f(d.get("rel_diff"))})
        for d in differences + sp_differences
    ][:200]
    # causes first: a missing gradient or a skipped all-reduce explains the divergence it produces
    report.findings = unused + no_sync + findings + loss + steps
    if report.step_errors and not explained:
        report.notes.append(
            f"the run stopped at a failing step on rank(s) {sorted(report.step_errors)}; checks cover the steps before it"
        )
    report.healthy = is_healthy(report.findings) and not report.step_errors
    return report


def build_reports(payload: dict[str, Any], entrypoints: list[str], out: Path) -> list[DistributedReport]:
    """One report per entrypoint from the runner's payload and the files its ranks left in `out`."""
    world = int(payload.get("nproc") or 0)
    cases = payload.get("cases") or []
    event = payload.get("event")
    reports: list[DistributedReport] = []
    failure_reported = False
    for i, spec in enumerate(entrypoints):
        summary = cases[i] if i < len(cases) else None
        if summary is not None and summary.get("load_error"):
            err = summary["load_error"]
            if len(entrypoints) == 1:
                raise from_runner_error(
                    RunnerError(
                        str(err.get("kind", "contract_error")),
                        str(err.get("message", "")),
                        key=err.get("key"),
                        detail=err.get("traceback"),
                    ),
                    "check_distributed",
                )
            reports.append(
                _not_checked(
                    spec, world, f"the entrypoint is not usable ({err.get('kind')}): {err.get('message')}"
                )
            )
        elif summary is not None and summary.get("status") != "running":
            reports.append(case_report(summary, spec, world))
        elif event is not None and not failure_reported:
            reports.append(_failed_case(payload, summary or {}, spec, world, out))
            failure_reported = True
        elif i == 0:
            raise _no_report(payload)
        else:
            reports.append(
                _not_checked(spec, world, "not checked: the job ended during an earlier entrypoint")
            )
    for r in reports:
        r.duration_s = float(payload.get("duration_s") or 0.0)
        r.notes.extend(payload.get("notes") or [])
    return reports


def _not_checked(spec: str, world: int, note: str) -> DistributedReport:
    return DistributedReport(entrypoint=spec, healthy=False, completed=False, world_size=world, notes=[note])


def _failed_case(
    payload: dict[str, Any], summary: dict[str, Any], spec: str, world: int, out: Path
) -> DistributedReport:
    report = (
        case_report(summary, spec, world)
        if summary
        else DistributedReport(entrypoint=spec, healthy=False, world_size=world)
    )
    fr, fr_note = read_flight_recorder(out, world)
    states = rank_states(payload, out, fr)
    report.completed = False
    report.ranks = states
    report.flight_recorder = fr
    if fr_note:
        report.notes.append(fr_note)
    report.findings = failure_findings(payload, states, fr) + report.findings
    report.healthy = False
    return report


def _no_report(payload: dict[str, Any]) -> AnalysisError:
    ranks = payload.get("ranks") or []
    errors = [(r.get("report") or {}).get("error") for r in ranks]
    errors = [e for e in errors if e]
    tail = "\n".join(str(r.get("log_tail", ""))[-1200:] for r in ranks)
    if "No module named 'torch'" in tail:
        return AnalysisError(
            "torch is not installed in the target interpreter", "install torch there or pass python="
        )
    message = (errors[0] or {}).get("message") if errors else "no rank wrote a report"
    return AnalysisError(
        f"check_distributed: the ranks stopped before checking anything: {message}\n{tail[-2000:]}",
        "run the entrypoint under torchrun yourself to see the full error, fix it, and retry",
    )


def check_many(
    entrypoints: list[str],
    *,
    python: Path,
    cwd: Path,
    nproc: int = 2,
    steps: int = 2,
    backend: str = "auto",
    rtol: float = 1e-4,
    rank_rtol: float = 1e-6,
    timeout_s: float = 240.0,
    hang_s: float = 90.0,
    py_spy: str | None = None,
    cancel_event: threading.Event | None = None,
) -> list[DistributedReport]:
    """Check every entrypoint in one launch of `nproc` ranks; one report each, in order."""
    if not entrypoints:
        raise AnalysisError("no entrypoint to check", "pass at least one entrypoint")
    with tempfile.TemporaryDirectory(prefix="trainsleuth-dist-") as tmp:
        out = Path(tmp) / "run"
        args = ["--out", str(out), "--nproc", str(nproc), "--steps", str(steps), "--backend", backend]
        args += ["--rtol", repr(rtol), "--rank-rtol", repr(rank_rtol), "--timeout", repr(timeout_s)]
        args += ["--hang-s", repr(hang_s), "--collective-timeout", str(int(max(timeout_s, hang_s + 30)))]
        if py_spy:
            args += ["--py-spy", py_spy]
        for spec in entrypoints:
            args += ["--entrypoint", spec]
        try:
            outcome = run_runner(
                "dist_runner.py",
                args,
                python=python,
                cwd=cwd,
                timeout_s=timeout_s + 60,
                cancel_event=cancel_event,
            )
        except RunnerError as exc:
            raise from_runner_error(exc, "check_distributed") from None
        reports = build_reports(outcome.payload, entrypoints, out)
    for r in reports:
        r.interpreter = str(python)
    return reports


def check_distributed(entrypoint: str, **kwargs: Any) -> DistributedReport:
    return check_many([entrypoint], **kwargs)[0]

"""`check_distributed command=...`: the user's own multi-process command, observed on every rank.

The command (`torchrun ...`, `python -m torch.distributed.run ...`, `accelerate launch ...`, a
multi-node launch, a shell line that starts several) runs under the observer with its `dist`
plugin: every rank writes digests of what its modules hold at their first use and after each
observed step (`runners/_ts_observe_dist.py`); `digests.py` compares them across ranks. Nothing is
exchanged through the job's collectives, so the check cannot pair with, reorder or block them.
Meanwhile `hangwatch.py` watches the ranks' progress: when they stop, it takes their stacks and
Flight Recorder records before stopping the job, and `failure.py` / `flight.py` explain the hang.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainsleuth.knowledge.links import failure_modes_for
from trainsleuth.tools.distributed import digests
from trainsleuth.tools.distributed.check import (
    Difference,
    DistributedReport,
    ObservedRank,
    describe_wrapper,
)
from trainsleuth.tools.distributed.errors import AnalysisError
from trainsleuth.tools.distributed.failure import failure_findings
from trainsleuth.tools.distributed.hangwatch import COLLECT_BUDGET_S, HangWatch, dumped_notes, rank_states
from trainsleuth.tools.findings import Finding, is_healthy
from trainsleuth.tools.observe import CommandError, ObservedRun, ObserveError, require_training, run_observed

FR_BUFFER = "2000"  # collectives the Flight Recorder keeps per process group


def check_command(
    command: str | list[str],
    *,
    python: Path,
    workspace: Path,
    steps: int = 2,
    rank_rtol: float = 1e-6,
    hang_s: float = 90.0,
    timeout_s: float = 300.0,
    py_spy: str | None = None,
    cancel_event: threading.Event | None = None,
    on_start: Callable[[Path], None] | None = None,
    env: dict[str, str] | None = None,
) -> DistributedReport:
    """Run `command` observed on every rank for `steps` iterations; compare the ranks, explain a hang."""
    kill = threading.Event()
    run_env = dict(os.environ if env is None else env)
    run_env.setdefault("TORCH_FR_BUFFER_SIZE", FR_BUFFER)
    watches: list[HangWatch] = []

    def started(run_dir: Path) -> None:
        if on_start is not None:
            on_start(run_dir)
        watch = HangWatch(
            run_dir / "out", hang_s=hang_s, timeout_s=timeout_s, kill=kill, cancel=cancel_event, py_spy=py_spy
        )
        watches.append(watch)
        watch.start()

    try:
        run = run_observed(
            command,
            python=python,
            workspace=workspace,
            plugins=["dist"],
            steps=steps,
            stop=False,  # compared over `steps` steps, then watched to its end: a hang comes at an epoch's end
            timeout_s=timeout_s + COLLECT_BUDGET_S,
            cancel_event=kill,
            env=run_env,
            on_start=started,
        )
    except CommandError as exc:
        raise AnalysisError(
            f"check_distributed: {exc}",
            "give the command you run, e.g. 'torchrun --nproc_per_node 2 train.py'",
        ) from None
    finally:
        for watch in watches:
            watch.stop()
    watch = watches[0]
    if watch.event == "cancelled":
        raise AnalysisError("check_distributed: the run was cancelled", "call again when ready")
    out = run.run_dir / "out"
    files = digests.read_rank_files(out)
    comparison = digests.compare_ranks(files, rank_rtol)
    if watch.event is None:
        _require_ranks(run, comparison)
    elif watch.event == "timeout_progressing" and len(comparison.ranks) < 2:
        # stopped while training: the processes were killed before they wrote their reports, so what was
        # compared is the ranks' digest files
        raise AnalysisError(
            f"check_distributed: the job was still training at timeout_s={timeout_s:g}s and fewer than two "
            "ranks had written their digests",
            "give a shorter configuration or a larger timeout_s",
        )
    report = _report(run, comparison, steps)
    if watch.event == "timeout_progressing":
        at = ", ".join(f"rank {r} at step {s}" for r, s in sorted(watch.progress.items()))
        report.notes.append(
            f"the job was still training at timeout_s={timeout_s:g}s ({at}) and was stopped there: no hang in that "
            "time (give a shorter configuration, or a larger timeout_s, to watch it to its end)"
        )
    elif watch.event is not None:
        states, fr, notes = rank_states(watch, files, run.reports)
        report.completed = False
        report.ranks = states
        report.flight_recorder = fr
        report.notes.extend(notes + dumped_notes(watch))
        payload = {"event": watch.event, "hang_s": hang_s}
        report.findings = failure_findings(payload, states, fr) + report.findings
        if watch.event == "timeout" and not watch.progress:
            report.notes.append(
                f"no rank finished an iteration within timeout_s={timeout_s:g}s: the job was stopped where the "
                "stacks show (raise timeout_s if it is only slow to start)"
            )
    if watch.event is None and report.steps_taken < steps:
        report.notes.append(
            "the command ended before the observed steps were done: the steps it took were compared"
        )
    report.healthy = is_healthy(report.findings) and report.completed
    report.interpreter = str(python)
    return report


def _require_ranks(run: ObservedRun, comparison: digests.Comparison) -> None:
    """The run trained on several ranks, or an error that says why there is nothing to compare."""
    try:
        trained = require_training(run)
    except ObserveError as exc:
        detail = f"\n{exc.detail[-1500:]}" if exc.detail else ""
        raise AnalysisError(f"check_distributed: {exc.message}{detail}", exc.next_step) from None
    if len(comparison.ranks) < 2 and all(int(r["identity"].get("world_size", 1)) <= 1 for r in trained):
        raise AnalysisError(
            "check_distributed: the command trained in one process (no RANK / WORLD_SIZE from a launcher), "
            "so there are no ranks to compare",
            "give the multi-process command, e.g. 'torchrun --nproc_per_node 2 train.py ...'",
        )


def _report(run: ObservedRun, comp: digests.Comparison, steps: int) -> DistributedReport:
    reports = {
        int(r["identity"]["rank"]): r
        for r in run.reports
        if r["identity"].get("world_size", 1) > 1 or len(run.reports) == 1
    }
    rank_files = digests.training_ranks(run_files := digests.read_rank_files(run.run_dir / "out"))
    world = max(
        [int(f.process.get("world_size") or 0) for f in rank_files.values()]
        + [int(r["identity"].get("world_size", 1)) for r in reports.values()]
        + [len(rank_files)]
    )
    findings, first = digests.findings(comp)
    report = DistributedReport(
        entrypoint="",
        command=run.command.text,
        healthy=True,
        world_size=world,
        backend=comp.backend,
        wrapper=", ".join(f"DDP({w.get('module')})" for w in comp.ddp) or "no DDP seen",
        wrappers=[describe_wrapper(w) for w in comp.ddp],
        first_divergence=first,
        outside_state=comp.outside_ddp,
        per_rank_by_design=comp.by_design[:50],
        duration_s=run.process.duration_s,
    )
    report.processes = [_observed_rank(rank, reports.get(rank), f) for rank, f in rank_files.items()]
    report.steps_taken = max((len(p.steps) for p in report.processes), default=0)
    report.losses_by_step = _losses(report.processes)
    report.differences = [
        Difference(
            name=d.name,
            kind=d.kind,
            phase=d.phase,
            step=d.step,
            rank=d.ranks[0] if d.ranks else None,
            ranks=d.ranks,
            max_abs_diff=d.max_abs_diff,
            rel_diff=d.rel_diff,
        )
        for d in comp.diffs[:200]
    ]
    report.findings = _failures(report.processes) + findings
    report.notes.extend(_notes(run, comp, steps, run_files))
    return report


def _observed_rank(rank: int, report: dict[str, Any] | None, f: digests.RankFile) -> ObservedRank:
    proc = f.process
    report = report or {}
    iterations = report.get("iterations") or []
    exc = report.get("exception")
    modules = (((report.get("plugins") or {}).get("dist") or {}).get("roots")) or []
    steps = [int(it["step"]) for it in iterations]
    if not report:  # no report: the process was killed; its digests still say how far it got
        steps = sorted({int(s["step"]) for s in f.snapshots if s.get("phase") == "after_step"})
    return ObservedRank(
        rank=rank,
        node=int(proc.get("node") or 0),
        local_rank=int(proc.get("local_rank") or 0),
        hostname=str(proc.get("hostname") or ""),
        pid=int(proc.get("pid") or 0),
        reason=report.get("reason") or "no report (the process was killed)",
        steps=steps,
        losses=[(it.get("backward") or [{}])[0].get("loss") for it in iterations],
        modules=[f"{label} ({how})" for label, how in modules][:30],
        error=f"{exc.get('type')}: {exc.get('message')}"[:2000] if exc else None,
    )


def _losses(processes: list[ObservedRank]) -> list[list[float]]:
    steps = sorted({s for p in processes for s in p.steps})
    out = []
    for step in steps[:100]:
        row = []
        for p in processes:
            i = p.steps.index(step) if step in p.steps else None
            loss = p.losses[i] if i is not None and i < len(p.losses) else None
            row.append(loss if isinstance(loss, float) else float("nan"))
        out.append(row)
    return out


def _failures(processes: list[ObservedRank]) -> list[Finding]:
    failed = [p for p in processes if p.error]
    if not failed:
        return []
    first = failed[0]
    return [
        Finding(
            code="rank_failed",
            severity="error",
            message=(
                f"rank{'s' if len(failed) > 1 else ''} {', '.join(str(p.rank) for p in failed)} raised during the "
                f"observed run: {first.error[:400] if first.error else ''}"
            ),
            step=(first.steps[-1] + 1) if first.steps else None,
            evidence={"ranks": [p.rank for p in failed], "error": (first.error or "")[:1500]},
            failure_modes=failure_modes_for("rank_failed"),
        )
    ]


def _notes(
    run: ObservedRun, comp: digests.Comparison, steps: int, files: list[digests.RankFile]
) -> list[str]:
    notes = []
    if len(comp.ranks) >= 2:
        notes.append(
            f"compared {comp.compared} tensors (parameters, buffers and tensor attributes of "
            f"{len(comp.roots)} module(s): {', '.join(comp.roots[:8])}) across ranks {comp.ranks} at their first "
            f"use and after each of up to {steps} observed step(s); the observer exchanged nothing through the "
            "job's collectives (each rank wrote its digests to a file)"
        )
    if comp.only_on_some:
        notes.append("held on some ranks only, so not compared: " + "; ".join(comp.only_on_some[:10]))
    if comp.structure:
        notes.append(
            "different shapes or dtypes across ranks (sharded by design, or built differently): "
            + "; ".join(comp.structure[:5])
        )
    others = [f for f in files if not f.is_rank]
    if others and any(f.snapshots for f in others):
        notes.append(f"{len(others)} process(es) without a rank (launcher, workers) were not compared")
    if run.workspace_changes:
        notes.append(
            "the run changed files in the workspace although it ran in a copy (native code writing by "
            f"absolute path?): {', '.join(run.workspace_changes[:10])}"
        )
    return notes

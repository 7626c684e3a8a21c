"""`check_distributed command=...`: the user's own distributed launch, observed on every rank.

The command (`torchrun --nproc_per_node 2 train.py`, `python -m torch.distributed.run ...`, two
torchrun agents as two nodes, a shell script that ends in one of these) runs under the observer with
its `dist` plugin (`runners/_ts_observe_dist.py`): every rank writes digests of every tensor its models
hold, when each model is first called and at each of the first `steps` steps, and never calls a
collective of its own. The run goes on to its end (or `timeout_s`) while `watch.HangWatch` looks for a
hang; then `digests.py` compares the ranks and, for a hang, `failure.py`/`flight.py` read every rank's
stack and Flight Recorder records.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainsleuth.knowledge.links import failure_modes_for
from trainsleuth.tools.distributed import digests as dg
from trainsleuth.tools.distributed.check import Difference, DistributedReport, describe_wrapper
from trainsleuth.tools.distributed.errors import AnalysisError
from trainsleuth.tools.distributed.failure import failure_findings, rank_states, read_flight_recorder
from trainsleuth.tools.distributed.watch import HangWatch
from trainsleuth.tools.findings import Finding, is_healthy

PLUGIN = "dist"
FR_BUFFER = "2000"
KILL_GRACE_S = 120.0


def _environment(notes: list[str]) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TORCH_FR_BUFFER_SIZE", FR_BUFFER)  # the Flight Recorder records gloo and NCCL collectives
    if env.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL":
        env["TORCH_DISTRIBUTED_DEBUG"] = "INFO"
        notes.append(
            "TORCH_DISTRIBUTED_DEBUG=DETAIL was replaced by INFO (with torch 2.13 on gloo, DETAIL kills a healthy DDP "
            "job with SIGSEGV)"
        )
    return env


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
    cwd: Path | None = None,
    on_start: Callable[[Path], None] | None = None,
) -> DistributedReport:
    """Run `command` to its end (or `timeout_s`), comparing the ranks over its first `steps` steps."""
    from trainsleuth.tools.observe import CommandError, run_observed

    notes: list[str] = []
    kill = threading.Event()
    watch: dict[str, HangWatch] = {}

    def started(run_dir: Path) -> None:
        if on_start is not None:
            on_start(run_dir)
        watch["w"] = HangWatch(run_dir / "out", kill, hang_s=hang_s, timeout_s=timeout_s, py_spy=py_spy)
        watch["w"].start()

    done = threading.Event()
    if cancel_event is not None:

        def forward() -> None:
            while not done.is_set():
                if cancel_event.wait(0.5):
                    kill.set()
                    return

        threading.Thread(target=forward, name="trainsleuth-cancel", daemon=True).start()
    t0 = time.time()
    try:
        run = run_observed(
            command,
            python=python,
            workspace=workspace,
            plugins=[PLUGIN],
            steps=steps,
            stop=False,
            timeout_s=timeout_s + KILL_GRACE_S,
            cancel_event=kill,
            env=_environment(notes),
            cwd=cwd,
            on_start=started,
        )
    except CommandError as exc:
        raise AnalysisError(
            str(exc), "give the command you run, e.g. 'torchrun --nproc_per_node 2 train.py'"
        ) from None
    finally:
        done.set()
        if "w" in watch:
            watch["w"].stop()
    if cancel_event is not None and cancel_event.is_set():
        raise AnalysisError("the check was cancelled", "call again when ready")
    hang = watch["w"]
    out = run.run_dir / "out"
    every = dg.read_hellos(out)
    hellos = [h for h in every if h.get("is_rank")]
    world = max((int(h.get("world_size", 1)) for h in hellos), default=1)
    if every and world < 2:
        raised = next((r["exception"] for r in run.reports if r.get("exception")), None)
        raise AnalysisError(
            f"the command ran a single process ({run.command.launcher} launcher, no RANK/WORLD_SIZE from a "
            "distributed launcher): there are no ranks to compare"
            + (f"; it raised {raised['type']}: {str(raised['message'])[:300]}" if raised else ""),
            "give the distributed launch you run, e.g. 'torchrun --nproc_per_node 2 train.py'",
        )
    if not hellos:
        raise _nothing_observed(run)
    ranks = dg.read_digests(out)
    report = DistributedReport(
        command=run.command.text,
        healthy=True,
        world_size=world,
        backend=next((r.backend for r in ranks if r.backend), None),
        interpreter=str(python),
        notes=notes,
    )
    _describe_wrapping(report, ranks)
    comp = dg.compare_ranks(ranks, rank_rtol)
    findings = dg.findings(comp, [str(w.get("module")) for w in (ranks[0].wrappers if ranks else [])])
    report.differences = [Difference(**row) for row in dg.differences(comp)]
    judged = [d for d in comp.divergences if d.kind != dg.RUNNING]
    if judged:
        d = judged[0]
        report.first_divergence = f"{d.kind} {d.name} on rank(s) {d.ranks}, {dg._when(d)}"
    report.steps_taken = len({k for (p, k) in (ranks[0].points if ranks else {}) if p == "step"})
    report.notes.extend(comp.notes)
    report.losses_by_step = _losses(run.reports, hellos)
    if hang.event in ("hang", "timeout"):
        findings = _hang_findings(report, hang, hellos, out) + findings
    elif hang.event == "timeout_progressing":
        report.completed = False
        report.notes.append(
            f"the job was still making progress after timeout_s={timeout_s:g}s and was stopped there (ranks at step "
            f"{', '.join(f'{r}: {s}' for r, s in sorted(hang.last_steps.items()))}); no hang was seen"
        )
    else:
        findings = _failure_findings(run, hellos) + findings
        if report.steps_taken == 0 and not any(r.get("last_iteration") for r in run.reports):
            failed = "; ".join(f.message for f in findings if f.code == "rank_failed")[:1500]
            raise AnalysisError(
                "no rank finished a training step (no optimizer step was seen on any rank) and the job ended: "
                f"there is nothing to compare{'; ' + failed if failed else ''}\n{run.process.output_tail(2000)}",
                "run the same command in a terminal (it stops before training), or give one that reaches training",
            )
    report.processes = _processes(run.reports, hellos, hang)
    report.findings = findings
    report.notes.extend(hang.notes)
    if run.workspace_changes:
        report.notes.append(
            "files in the workspace changed during the run (written by code the observer cannot redirect): "
            + ", ".join(run.workspace_changes[:10])
        )
    if report.steps_taken == 0 and not findings:
        report.notes.append("no rank finished an observed step: only the models' first calls were compared")
    report.healthy = is_healthy(findings) and report.completed
    report.duration_s = round(time.time() - t0, 2)
    return report


def _describe_wrapping(report: DistributedReport, ranks: list[dg.RankDigests]) -> None:
    wrappers = ranks[0].wrappers if ranks else []
    report.wrappers = [describe_wrapper(w) for w in wrappers]
    report.wrapper = ", ".join(f"{w.get('kind')}({w.get('module')})" for w in wrappers) or "none found"
    meta = ranks[0].meta if ranks else {}
    outside = sorted(
        {str(m.get("root") or m.get("module")) for m in meta.values() if m.get("in_ddp") is False}
    )
    if wrappers and outside:
        report.outside_state = outside[:50]
    report.frozen_parameters = sorted(n for n, m in meta.items() if m.get("kind") == "frozen parameter")[:200]


def _losses(reports: list[dict[str, Any]], hellos: list[dict[str, Any]]) -> list[list[float]]:
    """Per observed step, each rank's first loss (from the observer's reports, when the ranks wrote them)."""
    pids = {int(h["pid"]): int(h["rank"]) for h in hellos}
    by_rank: dict[int, list[Any]] = {}
    for rep in reports:
        rank = pids.get(int(rep["identity"]["pid"]))
        if rank is None:
            continue
        by_rank[rank] = [(it.get("backward") or [{}])[0].get("loss") for it in rep.get("iterations") or []]
    if len(by_rank) < 2:
        return []
    n = min(len(v) for v in by_rank.values())
    return [[by_rank[r][i] for r in sorted(by_rank)] for i in range(n)]


def _processes(
    reports: list[dict[str, Any]], hellos: list[dict[str, Any]], hang: HangWatch
) -> list[dict[str, Any]]:
    by_pid = {int(r["identity"]["pid"]): r for r in reports}
    rows = []
    for h in hellos:
        rep = by_pid.get(int(h["pid"]))
        if rep is not None:
            ended = rep.get("reason")
            if rep.get("exception"):
                ended = f"raised {rep['exception'].get('type')}"
            last = rep.get("last_iteration")
        else:
            ended = (
                "hung, stopped by the check" if hang.event in ("hang", "timeout") else "killed (no report)"
            )
            last = hang.last_steps.get(int(h["rank"]))
        rows.append(
            {
                "node": h.get("node"),
                "rank": h.get("rank"),
                "local_rank": h.get("local_rank"),
                "world_size": h.get("world_size"),
                "pid": h.get("pid"),
                "hostname": h.get("hostname"),
                "ended": ended,
                "last_step": last,
            }
        )
    return sorted(rows, key=lambda r: (r["node"] or 0, r["rank"] or 0))


def _hang_findings(
    report: DistributedReport, hang: HangWatch, hellos: list[dict[str, Any]], out: Path
) -> list[Finding]:
    """`job_hung` with every rank's stack and collective, and `collective_mismatch` (Flight Recorder, else stacks)."""
    entries = []
    for h in hellos:
        rank = int(h["rank"])
        stacks = out / f"dist-stacks-r{rank}.txt"
        entries.append(
            {
                "rank": rank,
                "returncode": None,
                "killed_by_launcher": True,
                "progress": {"phase": "training", "step": hang.last_steps.get(rank)},
                "stacks": stacks.read_text(encoding="utf-8", errors="replace") if stacks.exists() else "",
                "log_tail": "",
            }
        )
    payload = {"event": hang.event, "hang_s": round(hang.quiet_s or 0.0, 1), "ranks": entries}
    fr, fr_note = read_flight_recorder(out, report.world_size)
    states = rank_states(payload, out, fr)
    nodes = {int(h["rank"]): h.get("node") for h in hellos}
    for s in states:
        s.node = nodes.get(s.rank)
    report.ranks = states
    report.flight_recorder = fr
    report.completed = False
    if fr_note:
        report.notes.append(fr_note)
    return failure_findings(payload, states, fr)


def _failure_findings(run: Any, hellos: list[dict[str, Any]]) -> list[Finding]:
    """A rank whose program raised: `rank_failed` with its error and where (torchrun then stopped the others)."""
    ranks = {int(h["pid"]): h for h in hellos}
    out = []
    for rep in run.reports:
        h = ranks.get(int(rep["identity"]["pid"]))
        exc = rep.get("exception")
        if h is None or not exc:
            continue
        tb = str(exc.get("traceback") or "")
        out.append(
            Finding(
                code="rank_failed",
                severity="error",
                message=(
                    f"rank {h['rank']} (node {h.get('node')}) raised {exc.get('type')} after step "
                    f"{rep.get('last_iteration')}: {str(exc.get('message'))[:400]}"
                ),
                step=rep.get("last_iteration"),
                evidence={"rank": h["rank"], "node": h.get("node"), "traceback": tb[-3000:]},
                failure_modes=failure_modes_for("rank_failed"),
            )
        )
        if len(out) >= 4:
            break
    if not out and run.process.returncode not in (0, None) and not run.process.cancelled:
        out.append(
            Finding(
                code="rank_failed",
                severity="error",
                message=(
                    f"the job exited with code {run.process.returncode}; no rank recorded an exception (a signal, or "
                    "a failure in the launcher): see the output tail in the evidence"
                ),
                evidence={"output_tail": run.process.output_tail(3000)},
                failure_modes=failure_modes_for("rank_failed"),
            )
        )
    return out


def _nothing_observed(run: Any) -> AnalysisError:
    from trainsleuth.tools.observe import ObserveError, require_training

    try:
        require_training(run)
    except ObserveError as exc:
        return AnalysisError(f"{exc.message}\n{(exc.detail or '')[-2000:]}", exc.next_step)
    return AnalysisError(
        "no rank of the command was observed (the processes that trained did not run the observer)",
        "give the launch command itself (torchrun ... train.py), not a wrapper that resets PYTHONPATH",
    )

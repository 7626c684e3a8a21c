"""`dump_stacks`: py-spy stack dumps of a job's processes, grouped, with collective mismatches.

Processes are given by pid or found by a regular expression over their command line (only those
whose working directory or command-line paths lie inside a workspace). Every process is dumped
in parallel with `py-spy dump --json`, a few times `interval_s` apart; main-thread stacks are
grouped by signature, and `collective_mismatch` is reported when, in every sample, some ranks wait
in a torch.distributed collective that others never reached or are in a different one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from trainsleuth.knowledge.links import failure_modes_for
from trainsleuth.process import run_process
from trainsleuth.tools.distributed import flight
from trainsleuth.tools.distributed.errors import AnalysisError
from trainsleuth.tools.distributed.flight import FlightRecorderReport
from trainsleuth.tools.findings import Finding

COLLECTIVES = frozenset(
    {
        "all_reduce",
        "all_reduce_coalesced",
        "barrier",
        "monitored_barrier",
        "broadcast",
        "broadcast_object_list",
        "all_gather",
        "all_gather_into_tensor",
        "all_gather_object",
        "all_gather_coalesced",
        "_all_gather_base",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "_reduce_scatter_base",
        "all_to_all",
        "all_to_all_single",
        "reduce",
        "gather",
        "gather_object",
        "scatter",
        "scatter_object_list",
        "send",
        "recv",
        "send_object_list",
        "recv_object_list",
        "batch_isend_irecv",
        "new_group",
        "init_process_group",
        "destroy_process_group",
    }
)
PTRACE_HINT = (
    "py-spy could not attach to the process: ptrace is not permitted. Run the server as the same user as "
    "the job (or as root); on Linux with Yama, allow it with `sudo sysctl kernel.yama.ptrace_scope=0` "
    "(current value: {scope}); in Docker start the container with `--cap-add SYS_PTRACE`; in Kubernetes add "
    "SYS_PTRACE to the container's securityContext.capabilities"
)
MAX_FRAMES = 60
OBSERVER_MARK = "trainsleuth/tools/runners/_ts_observe"  # the observer's wrappers around the user's calls


def ptrace_scope() -> str:
    try:
        return Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        return "no Yama ptrace_scope on this system"


def find_py_spy() -> str | None:
    """The py-spy binary next to the running interpreter (the py-spy package installs it there), else PATH."""
    beside = Path(sys.executable).parent / ("py-spy.exe" if os.name == "nt" else "py-spy")
    if beside.exists():
        return str(beside)
    return shutil.which("py-spy")


def is_permission_error(text: str) -> bool:
    low = text.lower()
    return any(
        s in low
        for s in (
            "permission denied",
            "operation not permitted",
            "os error 1)",
            "os error 13)",
            "ptrace",
            "eperm",
        )
    )


class Frame(BaseModel):
    name: str
    file: str
    line: int | None = None


class ProcessStacks(BaseModel):
    pid: int
    rank: int | None = None
    local_rank: int | None = None
    role: str = Field(description="rank, launcher or process")
    cmdline: str = ""
    threads: int = 0
    collective: str | None = Field(
        default=None, description="torch.distributed call the main thread waits in"
    )
    call_site: str | None = Field(default=None, description="the user frame that called it")
    where: str | None = Field(
        default=None, description="innermost frame outside torch / the standard library"
    )
    main_stack: list[Frame] = Field(default_factory=list, description="main thread, innermost first")
    other_threads: dict[str, list[str]] = Field(default_factory=dict)
    error: str | None = None


class StackGroup(BaseModel):
    signature: list[str]
    pids: list[int]
    ranks: list[int | None]
    collective: str | None = None


class StacksReport(BaseModel):
    processes: list[ProcessStacks]
    groups: list[StackGroup]
    samples: int
    interval_s: float
    flight_recorder: FlightRecorderReport | None = None
    side_by_side: list[str] = Field(
        default_factory=list, description="per rank: where its stack waits | its last Flight Recorder record"
    )
    findings: list[Finding] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def render_text(self) -> str:
        ok = [p for p in self.processes if not p.error]
        lines = [
            f"dump_stacks: {len(ok)} of {len(self.processes)} processes dumped, {self.samples} sample(s) "
            f"{self.interval_s:g}s apart; {len(self.groups)} distinct main-thread stacks"
        ]
        lines.extend(f.one_line() for f in self.findings)
        for i, g in enumerate(self.groups, 1):
            ranks = [r for r in g.ranks if r is not None]
            who = f"ranks {ranks}" if ranks else f"pids {g.pids}"
            lines.append(f"group {i}: {who}" + (f" waiting in {g.collective}" if g.collective else ""))
            lines.extend(f"    {s}" for s in g.signature[:12])
        for p in self.processes:
            if p.error:
                lines.append(f"pid {p.pid}: {p.error}")
        if self.side_by_side:
            lines.append("stacks | Flight Recorder, per rank:")
            lines.extend(f"  {line}" for line in self.side_by_side)
        if self.flight_recorder is not None:
            fr = self.flight_recorder
            lines.append(
                f"Flight Recorder (format {fr.version}, dumps of ranks {fr.ranks}): {fr.matched} collective(s) "
                f"matched" + (f"; {fr.problem.message}" if fr.problem else "; no mismatch in the records")
            )
            lines.extend(f"note: {n}" for n in fr.notes)
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


# ---------------------------------------------------------------------------- process discovery


@dataclass
class Target:
    pid: int
    cmdline: str
    rank: int | None
    local_rank: int | None


def _inside(path: str, workspaces: Sequence[Path]) -> bool:
    try:
        real = Path(path).resolve()
    except (OSError, RuntimeError):
        return False
    return any(real == ws or real.is_relative_to(ws) for ws in workspaces)


def _in_workspace(proc: Any, cmdline: list[str], workspaces: Sequence[Path]) -> bool:
    import psutil

    try:
        if _inside(proc.cwd(), workspaces):
            return True
    except psutil.Error:
        pass
    return any(arg.startswith("/") and _inside(arg, workspaces) for arg in cmdline[1:])


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _target(proc: Any, cmdline: list[str]) -> Target:
    import psutil

    try:
        env = proc.environ()
    except psutil.Error:
        env = {}
    return Target(
        pid=proc.pid,
        cmdline=" ".join(cmdline)[:500],
        rank=_int(env.get("RANK")),
        local_rank=_int(env.get("LOCAL_RANK")),
    )


def find_targets(pids: Sequence[int], pattern: str | None, workspaces: Sequence[Path]) -> list[Target]:
    import psutil

    me = os.getpid()
    excluded = {me}
    try:
        excluded.update(p.pid for p in psutil.Process(me).parents())
    except psutil.Error:
        pass
    targets: dict[int, Target] = {}
    for pid in pids:
        if pid in excluded:
            raise AnalysisError(f"pid {pid} is the trainsleuth server (or its parent)", "pass the job's pids")
        try:
            proc = psutil.Process(pid)
            cmdline = proc.cmdline()
        except psutil.NoSuchProcess:
            raise AnalysisError(
                f"no process with pid {pid}", "check the pid (the job may have ended)"
            ) from None
        except psutil.Error as exc:
            raise AnalysisError(
                f"cannot inspect pid {pid}: {exc}", "run the server as the job's user"
            ) from None
        if not _in_workspace(proc, cmdline, workspaces):
            raise AnalysisError(
                f"pid {pid} ({' '.join(cmdline)[:120]}) neither runs in nor names a path inside the workspace",
                "dump processes of jobs started from the workspace, or start the server with --workspace for "
                "the job's folder",
            )
        targets[pid] = _target(proc, cmdline)
    if pattern:
        try:
            rx = re.compile(pattern)
        except re.error as exc:
            raise AnalysisError(
                f"pattern {pattern!r} is not a valid regular expression: {exc}", "fix the pattern"
            ) from None
        for proc in psutil.process_iter(["pid"]):
            if proc.pid in excluded or proc.pid in targets:
                continue
            try:
                cmdline = proc.cmdline()
            except psutil.Error:
                continue
            if not cmdline or "py-spy" in os.path.basename(cmdline[0]):
                continue
            if not rx.search(" ".join(cmdline)):
                continue
            if not _in_workspace(proc, cmdline, workspaces):
                continue
            targets[proc.pid] = _target(proc, cmdline)
    return sorted(targets.values(), key=lambda t: (t.rank is None, t.rank or 0, t.pid))


# ---------------------------------------------------------------------------- dumping and analysis


def py_spy_dump(
    py_spy: str, pid: int, native: bool, timeout_s: float, cancel: threading.Event | None
) -> tuple[Any, str | None]:
    argv = [py_spy, "dump", "--pid", str(pid), "--json"]
    if native:
        argv.append("--native")
    try:
        res = run_process(argv, timeout_s=timeout_s, cancel_event=cancel, tail_chars=4_000_000)
    except (FileNotFoundError, PermissionError) as exc:
        return None, f"cannot run py-spy: {exc}"
    if res.timed_out:
        return None, f"py-spy did not finish within {timeout_s:g}s"
    if res.cancelled:
        return None, "cancelled"
    if res.returncode != 0:
        text = (res.stderr_tail or res.stdout_tail).strip()
        if is_permission_error(text):
            return None, PTRACE_HINT.format(scope=ptrace_scope()) + f" (py-spy: {text[-300:]})"
        return None, f"py-spy failed: {text[-500:]}"
    try:
        return json.loads(res.stdout_tail), None
    except ValueError:
        return None, f"py-spy printed no JSON: {res.stdout_tail[-300:]}"


NATIVE_FILE = re.compile(r"\.(so(\.[0-9.]+)?|dylib|dll|pyd)$")


def _is_library(file: str) -> bool:
    f = file.replace("\\", "/")
    return (
        "/site-packages/" in f
        or "/dist-packages/" in f
        or OBSERVER_MARK in f
        or "/lib/python3" in f
        or f.startswith("<frozen")
        or bool(NATIVE_FILE.search(f))
    )


def _frame_text(fr: dict[str, Any]) -> str:
    return f"{fr.get('name')} ({fr.get('short_filename') or fr.get('filename')}:{fr.get('line')})"


def analyse_threads(threads: list[dict[str, Any]], pid: int) -> dict[str, Any]:
    main = None
    for th in threads:
        if th.get("thread_name") == "MainThread" or th.get("os_thread_id") == pid:
            main = th
            break
    if main is None and threads:
        main = threads[0]
    frames = (main or {}).get("frames") or []
    collective = None
    call_site = None
    # outermost torch.distributed collective frame: the call the user made
    for i in range(len(frames) - 1, -1, -1):
        fr = frames[i]
        fname = str(fr.get("filename") or "").replace("\\", "/")
        if "torch/distributed" in fname and fr.get("name") in COLLECTIVES:
            collective = str(fr.get("name"))
            for j in range(i + 1, len(frames)):
                outer = frames[j]
                if "torch/distributed" not in str(outer.get("filename") or "").replace("\\", "/"):
                    call_site = _frame_text(outer)
                    break
            break
    where = next((_frame_text(fr) for fr in frames if not _is_library(str(fr.get("filename") or ""))), None)
    others = {}
    for th in threads:
        if th is main:
            continue
        label = f"{th.get('thread_name') or 'thread'} {th.get('os_thread_id') or th.get('thread_id')}"
        others[label] = [_frame_text(fr) for fr in (th.get("frames") or [])[:8]]
    return {
        "frames": frames[:MAX_FRAMES],
        "collective": collective,
        "call_site": call_site,
        "where": where,
        "others": others,
        "n_threads": len(threads),
    }


def _state(proc: ProcessStacks) -> str:
    return f"{proc.collective} at {proc.call_site}" if proc.collective else "none"


def mismatch_in(sample: list[ProcessStacks]) -> dict[str, list[ProcessStacks]] | None:
    """Group the ranks of one sample by the collective they wait in; None when consistent."""
    ranks = [p for p in sample if p.role == "rank" and not p.error] or [
        p for p in sample if p.role == "process" and not p.error
    ]
    if len(ranks) < 2:
        return None
    waiting = [p for p in ranks if p.collective]
    if not waiting:
        return None
    ops = {p.collective for p in waiting}
    if len(ops) == 1 and len(waiting) == len(ranks):
        return None
    groups: dict[str, list[ProcessStacks]] = {}
    for p in ranks:
        groups.setdefault(p.collective or "", []).append(p)
    return groups


def dump_stacks(
    pids: Sequence[int],
    pattern: str | None,
    *,
    workspaces: Sequence[Path],
    native: bool = False,
    samples: int = 2,
    interval_s: float = 1.0,
    timeout_s: float = 30.0,
    flight_recorder: Path | None = None,
    cancel_event: threading.Event | None = None,
) -> StacksReport:
    if not pids and not pattern and flight_recorder is None:
        raise AnalysisError(
            "give pids or a pattern (or a folder of Flight Recorder dumps)",
            "pass pids=[...] or pattern='train.py', and flight_recorder= the dumps' folder if you have them",
        )
    fr = flight.analyse(flight.read_dumps(flight_recorder)) if flight_recorder is not None else None
    if not pids and not pattern:
        assert fr is not None
        report = StacksReport(processes=[], groups=[], samples=0, interval_s=interval_s, flight_recorder=fr)
        report.side_by_side = [
            f"rank {r}: no stack (no live process given) | {text}" for r, text in fr.last_by_rank.items()
        ]
        found = flight.finding(fr)
        report.findings = [found] if found else []
        return report
    report = _dump_live(pids, pattern, workspaces, native, samples, interval_s, timeout_s, cancel_event)
    if fr is not None:
        report.flight_recorder = fr
        found = flight.finding(fr)
        if found:
            report.findings.append(found)
        report.side_by_side = side_by_side(report.processes, fr)
    return report


def side_by_side(processes: list[ProcessStacks], fr: FlightRecorderReport) -> list[str]:
    """One line per rank: what its stack shows | what its Flight Recorder last recorded."""
    lines = []
    ranks = sorted({int(r) for r in fr.last_by_rank} | {p.rank for p in processes if p.rank is not None})
    for r in ranks:
        proc = next((p for p in processes if p.rank == r), None)
        if proc is None:
            stack = "no live process"
        elif proc.error:
            stack = f"no stack ({proc.error[:80]})"
        elif proc.collective:
            stack = f"waits in {proc.collective} at {proc.call_site}"
        else:
            stack = f"in {proc.where}"
        lines.append(f"rank {r}: {stack} | {fr.last_by_rank.get(str(r), 'no record')}")
    return lines


def _dump_live(
    pids: Sequence[int],
    pattern: str | None,
    workspaces: Sequence[Path],
    native: bool,
    samples: int,
    interval_s: float,
    timeout_s: float,
    cancel_event: threading.Event | None,
) -> StacksReport:
    py_spy = find_py_spy()
    if py_spy is None:
        raise AnalysisError(
            "py-spy is not installed next to the server's interpreter nor on PATH",
            "pip install py-spy into the server's environment",
        )
    targets = find_targets(pids, pattern, workspaces)
    if not targets:
        raise AnalysisError(
            f"no process matches {pattern!r} inside the workspace",
            "check the pattern against `ps -ef`; only processes whose working directory (or a path in their "
            "command line) is inside the workspace are considered",
        )
    has_ranks = any(t.rank is not None for t in targets)
    rounds: list[list[ProcessStacks]] = []
    for s in range(max(1, samples)):
        if s:
            if cancel_event is not None and cancel_event.wait(interval_s):
                break
            if cancel_event is None:
                time.sleep(interval_s)
        with ThreadPoolExecutor(max_workers=min(16, len(targets))) as pool:
            futures = [
                pool.submit(py_spy_dump, py_spy, t.pid, native, timeout_s, cancel_event) for t in targets
            ]
            results = [f.result() for f in futures]
        current = []
        for t, (data, err) in zip(targets, results, strict=True):
            role = "rank" if t.rank is not None else ("launcher" if has_ranks else "process")
            ps = ProcessStacks(
                pid=t.pid, rank=t.rank, local_rank=t.local_rank, role=role, cmdline=t.cmdline, error=err
            )
            if data is not None:
                info = analyse_threads(data if isinstance(data, list) else [], t.pid)
                ps.threads = info["n_threads"]
                ps.collective = info["collective"]
                ps.call_site = info["call_site"]
                ps.where = info["where"]
                ps.main_stack = [
                    Frame(name=str(f.get("name")), file=str(f.get("filename")), line=f.get("line"))
                    for f in info["frames"]
                ]
                ps.other_threads = info["others"]
            current.append(ps)
        rounds.append(current)
    last = rounds[-1]
    if all(p.error for p in last):
        errors = {p.error for p in last}
        raise AnalysisError(
            "no stack could be dumped: " + "; ".join(sorted(e for e in errors if e))[:1500],
            "see the message: allow ptrace, or check that the processes are Python programs still running",
        )
    groups: dict[tuple[str, ...], StackGroup] = {}
    for p in last:
        if p.error:
            continue
        sig = tuple(f"{f.name} ({Path(f.file).name}:{f.line})" for f in p.main_stack)
        g = groups.setdefault(
            sig, StackGroup(signature=list(sig), pids=[], ranks=[], collective=p.collective)
        )
        g.pids.append(p.pid)
        g.ranks.append(p.rank)
    report = StacksReport(
        processes=last,
        groups=sorted(groups.values(), key=lambda g: (-len(g.pids), g.pids)),
        samples=len(rounds),
        interval_s=interval_s,
    )
    if has_ranks and any(p.role == "launcher" for p in last):
        report.notes.append(
            "processes without a RANK variable (the torchrun agent) are shown but not compared"
        )
    # collective mismatch: present in every sample with the same ranks in the same states
    per_sample = [mismatch_in(r) for r in rounds]
    if all(m is not None for m in per_sample):
        states = [{p.pid: _state(p) for ps in m.values() for p in ps} for m in per_sample if m is not None]
        stable = all(s == states[0] for s in states)
        final = per_sample[-1]
        assert final is not None
        if stable:
            report.findings.append(_mismatch_finding(final, len(rounds)))
        else:
            report.notes.append(
                "ranks were in different collectives at some moments but the picture changed between samples: "
                "the job is progressing (dump again if it stalls)"
            )
    return report


def _who(ps: list[ProcessStacks]) -> str:
    ranks = [p.rank for p in ps if p.rank is not None]
    return (
        f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"
        if ranks
        else f"pids {[p.pid for p in ps]}"
    )


def _mismatch_finding(groups: dict[str, list[ProcessStacks]], samples: int) -> Finding:
    waiting = {op: ps for op, ps in groups.items() if op}
    absent = groups.get("", [])
    parts = []
    for op, ps in sorted(waiting.items(), key=lambda kv: -len(kv[1])):
        site = ps[0].call_site or "?"
        parts.append(f"{_who(ps)} {'wait' if len(ps) > 1 else 'waits'} in {op} (called at {site})")
    msg = "; ".join(parts)
    if absent:
        where = ", ".join(sorted({p.where or "?" for p in absent}))
        msg += f", while {_who(absent)} never reached it: they are in {where}"
    elif len(waiting) > 1:
        msg += ": the ranks are in different collectives, so neither completes"
    by_rank = {
        str(p.rank if p.rank is not None else p.pid): {
            "collective": p.collective,
            "call_site": p.call_site,
            "where": p.where,
            "pid": p.pid,
        }
        for ps in groups.values()
        for p in ps
    }
    return Finding(
        code="collective_mismatch",
        severity="error" if samples >= 2 else "warning",
        message=msg + " (make every rank call the same collectives in the same order)",
        evidence={"by_rank": by_rank, "samples": samples, "consistent_across_samples": samples >= 2},
        failure_modes=failure_modes_for("collective_mismatch"),
    )

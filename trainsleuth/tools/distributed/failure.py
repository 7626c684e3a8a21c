"""A distributed check whose job crashed or hung: every rank's state, last stack and log tail,
the Flight Recorder's records matched across ranks, and findings that say which rank stopped
where (`rank_failed`, `job_hung`, `collective_mismatch`).

Stacks come from py-spy (`rank<r>.pyspy.json`, when py-spy is available) and otherwise from
faulthandler, which every rank arms itself: on request (`rank<r>.stacks`) and on a fatal signal
(the `Fatal Python error` block of its log). Neither needs the rank's cooperation at that moment:
faulthandler writes from a signal handler or a watcher thread while the main thread is blocked
inside a collective.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from trainsleuth.knowledge.links import failure_modes_for
from trainsleuth.tools.distributed import flight
from trainsleuth.tools.distributed.errors import AnalysisError
from trainsleuth.tools.distributed.stacks import analyse_threads
from trainsleuth.tools.findings import Finding

RUNNER_MARK = "trainsleuth/tools/runners/"
CHECK_SITE = "trainsleuth's own check (between steps)"
THREAD_HEAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-f]+)[^\n]*\(most recent call first\):", re.M)
FRAME_LINE = re.compile(r'^\s+File "([^"]+)", line (\d+) in (\S+)', re.M)
TRACEBACK_LINE = re.compile(r'^\s+File "([^"]+)", line (\d+), in (\S+)', re.M)
LOG_TAIL = 1500
GLOO_MISMATCH = "Is there a distributed collective mismatch"


class RankState(BaseModel):
    rank: int
    status: str = Field(
        description="finished, failed, crashed, hung, or stopped (by the check after another rank failed)"
    )
    exit: str | None = Field(default=None, description="exit code or signal")
    phase: str | None = Field(
        default=None, description="what the rank was doing last (its own progress mark)"
    )
    step: int | None = None
    error: str | None = None
    collective: str | None = Field(
        default=None, description="torch.distributed call its main thread waits in"
    )
    where: str | None = Field(default=None, description="innermost frame of the user's code (or the check's)")
    stack: list[str] = Field(default_factory=list, description="main thread, innermost first")
    stack_source: str | None = Field(default=None, description="py-spy or faulthandler")
    flight_recorder: str | None = Field(default=None, description="its last recorded collective")
    log_tail: str = ""


# ---------------------------------------------------------------------------- stacks


def parse_faulthandler(text: str) -> list[dict[str, Any]]:
    """faulthandler's dump -> py-spy-like threads [{thread_name, frames: [{name, filename, line}]}]."""
    threads: list[dict[str, Any]] = []
    heads = list(THREAD_HEAD.finditer(text))
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        block = text[head.end() : end]
        frames = [
            {"name": m.group(3), "filename": m.group(1), "line": int(m.group(2))}
            for m in FRAME_LINE.finditer(block)
        ]
        threads.append(
            {"thread_name": head.group(2), "current": head.group(1) == "Current thread", "frames": frames}
        )
    # the main thread is the one that does not start in threading.py (the watcher thread does)
    main = next(
        (t for t in threads if t["frames"] and "threading.py" not in str(t["frames"][-1]["filename"])),
        None,
    )
    if main is not None:
        main["thread_name"] = "MainThread"
        threads.remove(main)
        threads.insert(0, main)
    return threads


def _fatal_block(log: str) -> str | None:
    i = log.rfind("Fatal Python error")
    return log[i:] if i >= 0 else None


def _check_site(text: str | None) -> str | None:
    if text and ("_ts_dist_" in text or "dist_runner" in text):
        return CHECK_SITE
    return text


def stack_lines(frames: list[dict[str, Any]]) -> list[str]:
    out = []
    for fr in frames[:25]:
        file = str(fr.get("filename") or "")
        mark = " [trainsleuth]" if RUNNER_MARK in file.replace("\\", "/") else ""
        out.append(f"{fr.get('name')} ({Path(file).name}:{fr.get('line')}){mark}")
    return out


def _error_of(entry: dict[str, Any], log: str) -> str | None:
    report = entry.get("report") or {}
    err = report.get("error") or {}
    if err.get("message"):
        return str(err["message"])[:1000]
    for mark in ("what():", "Fatal Python error:", "RuntimeError:", "Error:"):
        i = log.rfind(mark)
        if i >= 0:
            return log[i : i + 600].split("\n\n", 1)[0].strip()
    return None


def _clean_log(log: str) -> str:
    return "\n".join(line for line in log.splitlines() if not line.startswith("Extension modules:"))


def rank_states(
    payload: dict[str, Any], out: Path, fr: flight.FlightRecorderReport | None
) -> list[RankState]:
    event = payload.get("event")
    states = []
    for entry in payload.get("ranks") or []:
        r = int(entry.get("rank", 0))
        rc = entry.get("returncode")
        log = str(entry.get("log_tail") or "")
        if rc == 0:
            status = "finished"
        elif entry.get("killed_by_launcher"):
            status = "hung" if event in ("hang", "timeout") else "stopped"
        elif rc is not None and rc < 0:
            status = "crashed"
        else:
            status = "failed"
        exit_text = None
        if rc is not None and rc != 0:
            exit_text = entry.get("signal") or f"exit code {rc}"
        prog = entry.get("progress") or {}
        state = RankState(
            rank=r,
            status=status,
            exit=exit_text,
            phase=prog.get("phase"),
            step=prog.get("step"),
            error=_error_of(entry, log) if status in ("failed", "crashed") else None,
            log_tail=_clean_log(log)[-LOG_TAIL:],
        )
        threads, source = _threads_for(r, entry, out, log)
        if threads:
            info = analyse_threads(threads, -1)
            state.collective = info["collective"]
            state.where = _check_site(info["call_site"] if info["collective"] else info["where"])
            if state.collective and state.where is None:
                state.where = _check_site(info["where"])
            state.stack = stack_lines(info["frames"])
            state.stack_source = source
        if fr is not None:
            state.flight_recorder = fr.last_by_rank.get(str(r))
        states.append(state)
    return states


def parse_traceback(text: str) -> list[dict[str, Any]]:
    """A Python traceback (outermost first) as one py-spy-like main thread, innermost first."""
    frames = [
        {"name": m.group(3), "filename": m.group(1), "line": int(m.group(2))}
        for m in TRACEBACK_LINE.finditer(text)
    ]
    return [{"thread_name": "MainThread", "frames": frames[::-1]}] if frames else []


def _threads_for(
    rank: int, entry: dict[str, Any], out: Path, log: str
) -> tuple[list[dict[str, Any]], str | None]:
    error = (entry.get("report") or {}).get("error") or {}
    if error.get("traceback"):
        threads = parse_traceback(str(error["traceback"]))
        if threads:
            return threads, "traceback"
    spy = out / f"rank{rank}.pyspy.json"
    if spy.exists():
        try:
            body = json.loads(spy.read_text(encoding="utf-8"))
            if body.get("ok"):
                threads = json.loads(body.get("stdout") or "[]")
                if isinstance(threads, list) and threads:
                    return threads, "py-spy"
        except (OSError, ValueError):
            pass
    text = str(entry.get("stacks") or "") or (_fatal_block(log) or "")
    if text:
        threads = parse_faulthandler(text)
        if threads:
            return threads, "faulthandler"
    return [], None


def read_flight_recorder(out: Path, world: int) -> tuple[flight.FlightRecorderReport | None, str | None]:
    folder = out / "fr"
    if not folder.is_dir() or not any(folder.iterdir()):
        return None, "no rank wrote a Flight Recorder dump"
    try:
        dumps = flight.read_dumps(folder)
    except AnalysisError as exc:
        return None, f"the Flight Recorder dumps could not be read: {exc.message}"
    return flight.analyse(dumps, world), None


# ---------------------------------------------------------------------------- findings


def _who(state: RankState) -> str:
    if state.collective:
        return f"rank {state.rank} waits in {state.collective} at {state.where or '?'}"
    if any(frame.startswith(("_engine_run_backward ", "backward (")) for frame in state.stack[:6]):
        return f"rank {state.rank} is in backward (where DDP all-reduces gradients), called at {state.where or '?'}"
    return f"rank {state.rank} is in {state.where or state.phase or '?'}"


def failure_findings(
    payload: dict[str, Any], states: list[RankState], fr: flight.FlightRecorderReport | None
) -> list[Finding]:
    event = payload.get("event")
    findings: list[Finding] = []
    by_rank = {
        str(s.rank): {
            "status": s.status,
            "exit": s.exit,
            "phase": s.phase,
            "step": s.step,
            "collective": s.collective,
            "where": s.where,
            "flight_recorder": s.flight_recorder,
        }
        for s in states
    }
    if event == "rank_failed":
        first = next((s for s in states if s.rank == payload.get("first_failed")), None)
        if first is not None:
            gloo = any(GLOO_MISMATCH in (s.log_tail + (s.error or "")) for s in states)
            where = (
                f" in {first.collective} at {first.where}"
                if first.collective
                else (f" in {first.where}" if first.where else "")
            )
            step = (
                f" during step {first.step}" if first.step else (f" ({first.phase})" if first.phase else "")
            )
            message = (
                f"rank {first.rank} {'died with ' + (first.exit or '?') if first.status == 'crashed' else 'failed'}"
                f"{step}{where}"
                + (f": {first.error[:300]}" if first.error else "")
                + (
                    "; gloo reports that the data received does not match the size expected: the ranks called "
                    "collectives with different shapes"
                    if gloo
                    else ""
                )
            )
            others = [s for s in states if s.rank != first.rank]
            if others:
                message += "; meanwhile " + "; ".join(_who(s) for s in others)
            findings.append(
                Finding(
                    code="rank_failed",
                    severity="error",
                    message=message,
                    step=first.step,
                    evidence={
                        "rank": first.rank,
                        "exit": first.exit,
                        "error": first.error,
                        "stack": first.stack[:10],
                        "by_rank": by_rank,
                        "gloo_size_mismatch": gloo,
                    },
                    failure_modes=failure_modes_for("rank_failed"),
                )
            )
    elif event in ("hang", "timeout"):
        hung = [s for s in states if s.status == "hung"]
        reason = (
            f"no rank made progress for {payload.get('hang_s'):g}s"
            if event == "hang"
            else "the run reached its timeout"
        )
        findings.append(
            Finding(
                code="job_hung",
                severity="error",
                message=f"{reason}, so the check stopped the job: "
                + "; ".join(_who(s) for s in hung or states),
                step=max((s.step for s in states if s.step), default=None),
                evidence={"by_rank": by_rank, "hang_s": payload.get("hang_s"), "event": event},
                failure_modes=failure_modes_for("job_hung"),
            )
        )
    fr_finding = flight.finding(fr) if fr is not None else None
    if fr_finding is not None:
        findings.append(fr_finding)
    elif event in ("hang", "timeout"):
        waiting = {s.collective for s in states if s.collective and s.where != CHECK_SITE}
        if waiting and (len(waiting) > 1 or any(not s.collective or s.where == CHECK_SITE for s in states)):
            findings.append(
                Finding(
                    code="collective_mismatch",
                    severity="error",
                    message="stacks: "
                    + "; ".join(_who(s) for s in states)
                    + " (make every rank call the same collectives in the same order)",
                    evidence={"source": "stacks", "by_rank": by_rank},
                    failure_modes=failure_modes_for("collective_mismatch"),
                )
            )
    return findings

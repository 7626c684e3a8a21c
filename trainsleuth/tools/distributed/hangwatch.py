"""Watch an observed multi-process command for a hang; when it hangs, take every rank's records, then stop it.

The observer writes each process's last finished iteration (`progress-*.json`, `read_progress`; after
the observed steps the dist plugin's thread keeps marking them, since the run goes on to its end).
When no rank has finished an iteration for `hang_s` seconds while the command still runs (or the
run reaches its time limit), this watcher asks every rank for its Flight Recorder records and
stacks (`dump.request`, answered by `runners/_ts_observe_dist.py`'s watcher thread), takes a
`py-spy dump` of every rank in parallel (as `dump_stacks` does), and only then sets the event that
makes `run_process` kill the whole process tree. `rank_states` turns what was collected into the
per-rank picture `failure.failure_findings` explains (`job_hung`, `collective_mismatch`).
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from trainsleuth.tools.distributed import flight
from trainsleuth.tools.distributed.digests import RankFile, read_rank_files, training_ranks
from trainsleuth.tools.distributed.failure import (
    RankState,
    parse_faulthandler,
    read_flight_recorder,
    stack_lines,
)
from trainsleuth.tools.distributed.stacks import analyse_threads, py_spy_dump
from trainsleuth.tools.observe import read_progress

REQUEST = "dump.request"  # as runners/_ts_observe_dist.py watches for it
POLL_S = 0.5
DUMP_GRACE_S = 8.0
PY_SPY_TIMEOUT_S = 20.0
PROGRESSING_S = 10.0  # a step finished this recently at timeout_s: the job is training, not hung
COLLECT_BUDGET_S = PY_SPY_TIMEOUT_S + DUMP_GRACE_S + 15.0  # what a collection may add to the run's time


class HangWatch:
    """A thread beside `run_process`: `kill` is set when the job hung (after the records are taken) or
    when the caller cancelled; `event` then says which ("hang", "timeout" or "cancelled")."""

    def __init__(
        self,
        out_dir: Path,
        *,
        hang_s: float,
        timeout_s: float,
        kill: threading.Event,
        cancel: threading.Event | None = None,
        py_spy: str | None = None,
    ) -> None:
        self.out_dir = out_dir
        self.hang_s = hang_s
        self.timeout_s = timeout_s
        self.kill = kill
        self.cancel = cancel
        self.py_spy = py_spy
        self.event: str | None = None
        self.alive: dict[int, int] = {}  # rank -> pid, live when the records were taken
        self.threads: dict[int, list[dict[str, Any]]] = {}  # rank -> py-spy threads
        self.spy_errors: dict[int, str] = {}
        self.progress: dict[int, int] = {}  # rank -> last finished iteration
        self.stalled_s: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trainsleuth-hangwatch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=COLLECT_BUDGET_S + 10)

    def _run(self) -> None:
        t0 = time.monotonic()
        seen: dict[Any, Any] = {}
        last_change: float | None = None
        while not self._stop.wait(POLL_S):
            now = time.monotonic()
            if self.cancel is not None and self.cancel.is_set():
                self.event = "cancelled"
                self.kill.set()
                return
            marks = {(p.get("pid"), p.get("rank")): p.get("step") for p in read_progress(self.out_dir)}
            if marks != seen:
                seen = marks
                last_change = now
            if last_change is not None and now - last_change > self.hang_s:
                self.event = "hang"
                self.stalled_s = now - last_change
            elif now - t0 > self.timeout_s:
                if last_change is not None and now - last_change <= PROGRESSING_S:
                    self.event = "timeout_progressing"  # still training: stopped, nothing hung to explain
                    self._record_progress()
                    self.kill.set()
                    return
                self.event = "timeout"
            if self.event is not None:
                try:
                    self._collect()
                finally:
                    self.kill.set()
                return

    def _record_progress(self) -> None:
        for p in read_progress(self.out_dir):
            if p.get("rank") is not None and p.get("step") is not None:
                self.progress[int(p["rank"])] = max(int(p["step"]), self.progress.get(int(p["rank"]), 0))

    def _collect(self) -> None:
        """Flight Recorder and faulthandler stacks from every rank (by request), py-spy from outside."""
        import psutil

        self._record_progress()
        for rank, f in training_ranks(read_rank_files(self.out_dir)).items():
            pid = int(f.process.get("pid") or 0)
            try:
                if pid and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    self.alive[rank] = pid
            except psutil.Error:
                continue
        (self.out_dir / REQUEST).write_text(str(time.time()), encoding="utf-8")
        if self.py_spy and self.alive:
            with ThreadPoolExecutor(max_workers=min(16, len(self.alive))) as pool:
                futures = {
                    rank: pool.submit(py_spy_dump, self.py_spy, pid, False, PY_SPY_TIMEOUT_S, None)
                    for rank, pid in self.alive.items()
                }
                for rank, fut in futures.items():
                    data, err = fut.result()
                    if isinstance(data, list) and data:
                        self.threads[rank] = data
                    elif err:
                        self.spy_errors[rank] = err
        deadline = time.monotonic() + DUMP_GRACE_S
        while time.monotonic() < deadline:
            if all((self.out_dir / f"rank{r}.dumped").exists() for r in self.alive):
                break
            time.sleep(0.1)


def rank_states(
    watch: HangWatch, files: list[RankFile], reports: list[dict[str, Any]]
) -> tuple[list[RankState], flight.FlightRecorderReport | None, list[str]]:
    """Every rank as the hang left it: its stack (py-spy, else faulthandler), step, Flight Recorder record."""
    out = watch.out_dir
    ranks = training_ranks(files)
    world = max([int(f.process.get("world_size") or 0) for f in ranks.values()] + [len(ranks)])
    notes: list[str] = []
    fr, fr_note = read_flight_recorder(out, world)
    if fr_note:
        notes.append(fr_note)
    by_rank = {int(r["identity"]["rank"]): r for r in reports if r["identity"].get("world_size", 1) > 1}
    states = []
    for rank in sorted(set(ranks) | set(watch.alive)):
        report = by_rank.get(rank) or {}
        exc = report.get("exception")
        if rank in watch.alive:
            status = "hung"
        elif exc:
            status = "failed"
        else:
            status = "finished"
        state = RankState(
            rank=rank,
            status=status,
            step=watch.progress.get(rank),
            phase=f"after iteration {watch.progress[rank]}"
            if rank in watch.progress
            else "before its first step",
            error=(f"{exc.get('type')}: {exc.get('message')}" if exc else None),
        )
        threads, source = _threads(watch, rank)
        if threads:
            info = analyse_threads(threads, watch.alive.get(rank, -1))
            state.collective = info["collective"]
            state.where = info["call_site"] if info["collective"] else info["where"]
            if state.collective and state.where is None:
                state.where = info["where"]
            state.stack = stack_lines(info["frames"])
            state.stack_source = source
        elif rank in watch.spy_errors:
            notes.append(f"rank {rank}: py-spy: {watch.spy_errors[rank][:300]}")
        if fr is not None:
            state.flight_recorder = fr.last_by_rank.get(str(rank))
        states.append(state)
    return states, fr, notes


def _threads(watch: HangWatch, rank: int) -> tuple[list[dict[str, Any]], str | None]:
    if rank in watch.threads:
        return watch.threads[rank], "py-spy"
    path = watch.out_dir / f"rank{rank}.stacks"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return [], None
    threads = parse_faulthandler(text)
    # the dump was written by the rank's own watcher thread: the main thread is the one not in it
    threads = [
        t for t in threads if not any("_ts_observe_dist" in str(f.get("filename")) for f in t["frames"])
    ]
    return (threads, "faulthandler") if threads else ([], None)


def dumped_notes(watch: HangWatch) -> list[str]:
    """What the ranks said when asked for their records (a Flight Recorder that could not dump)."""
    notes = []
    for rank in sorted(watch.alive):
        path = watch.out_dir / f"rank{rank}.dumped"
        try:
            note = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            notes.append(f"rank {rank} did not answer the request for its records within {DUMP_GRACE_S:g}s")
            continue
        for key in ("flight_recorder_error", "stack_error"):
            if note.get(key):
                notes.append(f"rank {rank}: {key.replace('_', ' ')}: {note[key]}")
    return notes

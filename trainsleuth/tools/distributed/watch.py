"""Watch an observed distributed job for a hang, and record every rank's state before it is killed.

The ranks' observers write a progress mark at the end of each step (`read_progress`) and their pid at
start (`dist-hello-*.json`). When no rank has made progress for `hang_s` seconds while rank processes
live (before the first step, a rank that uses the CPU is starting up, which counts as progress; a rank
waiting inside a collective does not), the watcher: asks every rank for its Flight Recorder records and every thread's stack (the
observer's own thread writes them, which works while the main thread waits inside a collective),
takes `py-spy dump` of every live rank (as `dump_stacks` does), waits for the dumps, then sets the
kill event that stops the whole job. At `timeout_s` the job is stopped as well (with the same dumps
when it had stopped progressing).
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from trainsleuth.tools.distributed.digests import read_hellos
from trainsleuth.tools.distributed.stacks import _dump
from trainsleuth.tools.observe import read_progress

REQUEST = "dist-dump.request"  # as runners/_ts_observe_dist.py reads it
POLL_S = 0.5
DUMP_WAIT_S = 15.0
PY_SPY_TIMEOUT_S = 30.0
QUIET_AT_TIMEOUT_S = 5.0
BUSY_CPU = 0.2  # cores: before the first step, ranks using this much CPU are starting up, not hung


def alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class HangWatch:
    """A thread that stops a job that makes no progress (event 'hang') or runs past `timeout_s` ('timeout')."""

    def __init__(
        self, out: Path, kill: threading.Event, *, hang_s: float, timeout_s: float, py_spy: str | None
    ):
        self.out = out
        self.kill = kill
        self.hang_s = hang_s
        self.timeout_s = timeout_s
        self.py_spy = py_spy
        self.event: str | None = None
        self.quiet_s: float | None = None
        self.last_steps: dict[int, int] = {}
        self.dumped: list[int] = []
        self.notes: list[str] = []
        self._cpu: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trainsleuth-hang-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=DUMP_WAIT_S + PY_SPY_TIMEOUT_S + 5)

    def ranks(self) -> list[dict[str, Any]]:
        return [h for h in read_hellos(self.out) if h.get("is_rank")]

    def _run(self) -> None:
        started = time.time()
        last_change: float | None = None
        previous: tuple[tuple[int, int], ...] | None = None
        while not self._stop.wait(POLL_S):
            now = time.time()
            ranks = self.ranks()
            marks = tuple(
                sorted((int(p.get("pid", 0)), int(p.get("step", 0))) for p in read_progress(self.out))
            )
            if ranks and last_change is None:
                last_change = now  # the clock starts when the first rank is up
            if marks != previous:
                previous = marks
                last_change = now if ranks else last_change
            live = [h for h in ranks if alive(int(h["pid"]))]
            if not any(step for _pid, step in marks) and self._busy(live):
                last_change = (
                    now  # before the first step: importing, building, loading (a loaded machine is slow)
                )
            quiet = now - last_change if last_change is not None else 0.0
            if live and quiet > self.hang_s:
                self._record(ranks)
                self.event, self.quiet_s = "hang", quiet
                self._dump(live)
                self.kill.set()
                return
            if now - started > self.timeout_s:
                self._record(ranks)
                self.quiet_s = quiet
                self.event = "timeout" if quiet > QUIET_AT_TIMEOUT_S else "timeout_progressing"
                if live and self.event == "timeout":
                    self._dump(live)
                self.kill.set()
                return

    def _busy(self, live: list[dict[str, Any]]) -> bool:
        """Whether the ranks used the CPU since the last look (a rank waiting in a collective does not)."""
        import psutil

        used = 0.0
        for h in live:
            pid = int(h["pid"])
            try:
                t = psutil.Process(pid).cpu_times()
            except psutil.Error:
                continue
            total = float(t.user + t.system)
            used += total - self._cpu.get(pid, total)
            self._cpu[pid] = total
        return used >= BUSY_CPU * POLL_S

    def _record(self, ranks: list[dict[str, Any]]) -> None:
        by_pid = {int(p.get("pid", 0)): int(p.get("step", 0)) for p in read_progress(self.out)}
        self.last_steps = {int(h["rank"]): by_pid.get(int(h["pid"]), 0) for h in ranks}

    def _dump(self, live: list[dict[str, Any]]) -> None:
        """Flight Recorder and faulthandler stacks from every live rank, py-spy from outside, in parallel."""
        token = f"{time.time():.3f}"
        request = self.out / REQUEST
        request.write_text(token, encoding="utf-8")
        if self.py_spy:
            with ThreadPoolExecutor(max_workers=min(16, len(live))) as pool:
                futures = {
                    int(h["rank"]): pool.submit(
                        _dump, self.py_spy, int(h["pid"]), False, PY_SPY_TIMEOUT_S, None
                    )
                    for h in live
                }
                for rank, fut in futures.items():
                    data, err = fut.result()
                    body = {
                        "ok": data is not None,
                        "stdout": json.dumps(data) if data is not None else "",
                        "error": err,
                    }
                    (self.out / f"rank{rank}.pyspy.json").write_text(json.dumps(body), encoding="utf-8")
                    if err:
                        self.notes.append(f"py-spy on rank {rank}: {err[:300]}")
        else:
            self.notes.append(
                "py-spy is not installed beside the server: the stacks are faulthandler's, from each rank"
            )
        deadline = time.time() + DUMP_WAIT_S
        wanted = {int(h["rank"]) for h in live}
        while time.time() < deadline:
            done = {r for r in wanted if (self.out / f"dist-dumped-r{r}.json").exists()}
            if done == wanted:
                break
            time.sleep(0.2)
        self.dumped = sorted(r for r in wanted if (self.out / f"dist-dumped-r{r}.json").exists())
        missing = sorted(wanted - set(self.dumped))
        if missing:
            self.notes.append(
                f"rank(s) {missing} did not answer the request for Flight Recorder records and stacks within "
                f"{DUMP_WAIT_S:g}s (their Python threads did not run: a rank blocked while holding the GIL)"
            )

"""Background jobs: long work (bisects) runs in a thread of the server process, persisted in
the workspace store so its status, progress and result survive the request that started it.

A job is a function `fn(handle) -> dict` run in its own thread. Through the `JobHandle` it
reports progress (step i of about N, the current candidate), watches `handle.cancel_event`
(pass it to `run_process` so cancelling kills the test's whole process tree), and registers
what must be cleaned up (git worktrees, temporary folders) *before* creating it, so that the
cleanup also happens after a cancel, a failure, or a crash of the whole server:

- statuses: running, succeeded, failed, cancelled, interrupted;
- each row records the owning process (pid and its start time); when a manager opens the
  store, rows left `running` by a process that no longer exists are marked `interrupted`
  and their worktrees and folders are removed;
- cancellation works across processes: `cancel()` sets a flag in the store that the owning
  process polls, besides setting the event directly when the job runs here;
- a job may run in a process of its own (`spawn` here, `run_spawned` there), so that it outlives
  the server that started it (a per-call server of `trainsleuth client call`). While a call
  waits for it, the call's process is recorded as its *waiter*: if that process dies while
  waiting (a client that disconnected), the job is cancelled and cleaned up at once.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from trainsleuth.state.store import Store
from trainsleuth.tools.job_cleanup import remove_worktree as remove_worktree  # re-exported
from trainsleuth.tools.job_cleanup import run_cleanup
from trainsleuth.tools.job_records import (
    CANCELLED,
    FAILED,
    INTERRUPTED,
    MIGRATIONS,
    RUNNING,
    SUCCEEDED,
    JobCancelled,
    JobError,
    JobRecord,
    owner_alive,
    process_start_time,
    record_from_row,
)

log = logging.getLogger("trainsleuth.jobs")

CANCEL_POLL_S = 0.3

# Jobs running in this process, whichever manager started them (recovery must never touch them).
_LIVE_JOBS: set[str] = set()


# ---------------------------------------------------------------------------- the handle given to a job


class JobHandle:
    def __init__(self, manager: JobManager, job_id: str) -> None:
        self._manager = manager
        self.id = job_id
        self.cancel_event = threading.Event()
        self._cleanup_lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def check_cancelled(self) -> None:
        if self.cancel_event.is_set():
            raise JobCancelled(f"job {self.id} was cancelled")

    def progress(
        self, done: float, total: float | None = None, message: str | None = None, current: str | None = None
    ) -> None:
        self._manager._set_progress(self.id, done, total, message, current)

    def set_rendered(self, text: str, images: list[str], notes: list[str] | None = None) -> None:
        """Keep the job's text rendering and images (base64 PNG) for whoever fetches its result, and
        the notes appended to the text (kept when a finish step renders the result again)."""
        rendered = {"text": text, "images": images, "notes": list(notes or [])}
        self._manager._update(self.id, rendered=json.dumps(rendered))

    def add_cleanup(self, entry: dict[str, str]) -> None:
        """Register something to remove when the job ends (call before creating it)."""
        with self._cleanup_lock:
            self._manager._update_cleanup(self.id, lambda items: [*items, entry])

    def remove_cleanup(self, entry: dict[str, str]) -> None:
        """Forget an entry the job already removed itself."""
        with self._cleanup_lock:
            self._manager._update_cleanup(self.id, lambda items: [e for e in items if e != entry])


JobFn = Callable[[JobHandle], dict[str, Any]]


# ---------------------------------------------------------------------------- the manager


class JobManager:
    """Runs and tracks the jobs of one state store in this process. Use `manager_for(store)`."""

    def __init__(self, store: Store) -> None:
        self.store = store
        store.migrate("jobs", MIGRATIONS)
        self.pid = os.getpid()
        self.started = process_start_time(self.pid) or time.time()
        self._cond = threading.Condition()
        self._handles: dict[str, JobHandle] = {}
        self._threads: dict[str, threading.Thread] = {}
        self.recovered = self.recover_interrupted()

    # -- persistence helpers
    def _get_row(self, job_id: str) -> JobRecord | None:
        with self.store.connect() as conn:
            row = conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return record_from_row(row) if row else None

    def _update(self, job_id: str, **values: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in values)
        with self.store.transaction() as conn:
            conn.execute(f"UPDATE jobs SET {cols} WHERE id = ?", (*values.values(), job_id))
        with self._cond:
            self._cond.notify_all()

    def _update_cleanup(
        self, job_id: str, change: Callable[[list[dict[str, str]]], list[dict[str, str]]]
    ) -> None:
        with self.store.transaction() as conn:
            row = conn.execute("SELECT cleanup FROM jobs WHERE id = ?", (job_id,)).fetchone()
            items = json.loads(row["cleanup"]) if row else []
            conn.execute("UPDATE jobs SET cleanup = ? WHERE id = ?", (json.dumps(change(items)), job_id))

    def _set_progress(
        self, job_id: str, done: float, total: float | None, message: str | None, current: str | None
    ) -> None:
        """The job's latest progress, and the step appended to its history (so a waiter that polls
        relays every step, however fast they come)."""
        with self.store.transaction() as conn:
            conn.execute(
                "UPDATE jobs SET progress_done = ?, progress_total = ?, progress_message = ?, current = ? "
                "WHERE id = ?",
                (done, total, message, current, job_id),
            )
            if message is not None:
                conn.execute(
                    "INSERT INTO job_progress(job_id, seq, done, total, message, current) VALUES(?, "
                    "(SELECT COALESCE(MAX(seq), 0) + 1 FROM job_progress WHERE job_id = ?), ?, ?, ?, ?)",
                    (job_id, job_id, done, total, message, current),
                )
        with self._cond:
            self._cond.notify_all()

    def progress_since(self, job_id: str, after: int) -> list[tuple[int, float, float | None, str]]:
        """Progress steps of the job after step number `after`: (seq, done, total, message)."""
        with self.store.connect() as conn:
            rows = conn.execute(
                "SELECT seq, done, total, message FROM job_progress WHERE job_id = ? AND seq > ? ORDER BY seq",
                (job_id, after),
            ).fetchall()
        return [(int(r["seq"]), float(r["done"]), r["total"], str(r["message"])) for r in rows]

    # -- recovery
    def recover_interrupted(self) -> list[str]:
        """Mark jobs whose owning process is gone as interrupted and clean up after them."""
        with self.store.connect() as conn:
            rows = conn.execute("SELECT * FROM jobs WHERE status = ?", (RUNNING,)).fetchall()
        recovered: list[str] = []
        for row in rows:
            rec = record_from_row(row)
            pid, started = int(row["owner_pid"]), float(row["owner_started"])
            mine = pid == self.pid and abs(started - self.started) < 1.0
            if mine and rec.id in _LIVE_JOBS:
                continue
            if not mine and owner_alive(pid, started):
                continue
            problems = run_cleanup(rec.cleanup)
            note = f"left behind: {', '.join(problems)}" if problems else "its worktrees were removed"
            with self.store.transaction() as conn:
                conn.execute(
                    "UPDATE jobs SET status = ?, finished_at = ?, error = ?, next_step = ?, cleanup = ? "
                    "WHERE id = ? AND status = ?",
                    (
                        INTERRUPTED,
                        time.time(),
                        f"the server process that ran this job (pid {pid}) stopped before it finished; {note}",
                        "start the job again",
                        json.dumps([]),
                        rec.id,
                        RUNNING,
                    ),
                )
            recovered.append(rec.id)
            log.info("job %s was interrupted by a server restart; cleaned up", rec.id)
        return recovered

    # -- public API
    def submit(
        self, kind: str, fn: JobFn, *, title: str = "", params: dict[str, Any] | None = None
    ) -> JobRecord:
        job_id = f"job-{uuid.uuid4().hex[:12]}"
        now = time.time()
        _LIVE_JOBS.add(job_id)  # before the row exists, so no recovery can take it for orphaned
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO jobs(id, kind, title, params, status, created_at, owner_pid, owner_started) "
                "VALUES(?,?,?,?,?,?,?,?)",
                (
                    job_id,
                    kind,
                    title,
                    json.dumps(params or {}, default=str),
                    RUNNING,
                    now,
                    self.pid,
                    self.started,
                ),
            )
        handle = JobHandle(self, job_id)
        thread = threading.Thread(
            target=self._run, args=(handle, fn), name=f"trainsleuth-{job_id}", daemon=True
        )
        with self._cond:
            self._handles[job_id] = handle
            self._threads[job_id] = thread
        thread.start()
        rec = self._get_row(job_id)
        assert rec is not None
        return rec

    def _watch_cancel(self, handle: JobHandle, done: threading.Event) -> None:
        """Poll the store's cancel flag, so another process can cancel this job."""
        while not done.wait(CANCEL_POLL_S):
            try:
                with self.store.connect() as conn:
                    row = conn.execute(
                        "SELECT cancel_requested, waiter_pid, waiter_started FROM jobs WHERE id = ?",
                        (handle.id,),
                    ).fetchone()
            except Exception:
                continue
            if row is None:
                continue
            waiter_gone = row["waiter_pid"] is not None and not owner_alive(
                int(row["waiter_pid"]), float(row["waiter_started"] or 0)
            )
            if waiter_gone:
                log.info("job %s: the call waiting for it went away; cancelling", handle.id)
            if row["cancel_requested"] or waiter_gone:
                handle.cancel_event.set()
                return

    def _run(self, handle: JobHandle, fn: JobFn) -> None:
        done = threading.Event()
        watcher = threading.Thread(target=self._watch_cancel, args=(handle, done), daemon=True)
        watcher.start()
        status, result, error, next_step = FAILED, None, None, None
        try:
            result = fn(handle)
            if handle.cancelled:
                status, error = CANCELLED, "cancelled before it finished"
            else:
                status = SUCCEEDED
        except JobCancelled:
            status, error = CANCELLED, "cancelled before it finished"
        except JobError as exc:
            if handle.cancelled:
                status, error = CANCELLED, "cancelled before it finished"
            else:
                status, error, next_step = FAILED, exc.message, exc.next_step
        except Exception as exc:
            log.exception("job %s failed unexpectedly", handle.id)
            status = FAILED
            error = f"{type(exc).__name__}: {exc}"
            next_step = (
                "check the arguments; if they are right this is a trainsleuth bug (details in the server log)"
            )
        finally:
            done.set()
        if status == CANCELLED:
            next_step = "start the job again when you want it to run"
        try:
            rec = self._get_row(handle.id)
            problems = run_cleanup(rec.cleanup if rec else [])
            if problems:
                error = (error + "; " if error else "") + f"could not remove: {', '.join(problems)}"
            self._update(
                handle.id,
                status=status,
                finished_at=time.time(),
                result=json.dumps(result, default=str) if result is not None else None,
                error=error,
                next_step=next_step,
                cleanup=json.dumps([]),
            )
        finally:
            with self._cond:
                self._threads.pop(handle.id, None)
                self._handles.pop(handle.id, None)
                _LIVE_JOBS.discard(handle.id)
                self._cond.notify_all()

    # -- jobs in a process of their own
    def spawn(
        self,
        kind: str,
        argv: list[str],
        *,
        title: str = "",
        params: dict[str, Any] | None = None,
        cwd: Path | None = None,
        log_path: Path | None = None,
        waiter: bool = True,
    ) -> JobRecord:
        """Start `argv + [job_id]` as a detached process that runs the job (see `run_spawned`).

        The process gets its own session, so it survives the server and the client that started
        it; with `waiter`, this process is recorded as the one waiting for it (see `set_waiter`).
        """
        job_id = f"job-{uuid.uuid4().hex[:12]}"
        log_file = log_path or (Path(self.store.path).parent / "jobs" / f"{job_id}.log")
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(log_file, "ab") as out:
            proc = subprocess.Popen(
                [*argv, job_id],
                cwd=str(cwd) if cwd else None,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        # Reap it when it ends (else it lingers as a zombie that looks alive).
        threading.Thread(target=proc.wait, name=f"reap-{job_id}", daemon=True).start()
        started = process_start_time(proc.pid) or time.time()
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO jobs(id, kind, title, params, status, created_at, owner_pid, owner_started, "
                "waiter_pid, waiter_started, log_path) VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                (
                    job_id,
                    kind,
                    title,
                    json.dumps(params or {}, default=str),
                    RUNNING,
                    time.time(),
                    proc.pid,
                    started,
                    self.pid if waiter else None,
                    self.started if waiter else None,
                    str(log_file),
                ),
            )
        rec = self._get_row(job_id)
        assert rec is not None
        return rec

    def claim_finish(self, job_id: str) -> bool:
        """Claim the finished job's finish step (see server/longrun.py); False if another process has it."""
        with self.store.transaction() as conn:
            cur = conn.execute(
                "UPDATE jobs SET rendered = json_set(COALESCE(rendered, '{}'), '$.finishing', 1) "
                "WHERE id = ? AND status = ? AND json_extract(COALESCE(rendered, '{}'), '$.finishing') IS NULL",
                (job_id, SUCCEEDED),
            )
            return cur.rowcount == 1

    def set_finished(self, job_id: str, result: dict[str, Any] | None, text: str) -> None:
        """Keep the result and text the finish step made; it never runs again for this job."""
        with self.store.transaction() as conn:
            row = conn.execute("SELECT rendered FROM jobs WHERE id = ?", (job_id,)).fetchone()
            rendered = json.loads(row["rendered"]) if row and row["rendered"] else {}
            rendered.update({"text": text, "finished": True})
            conn.execute(
                "UPDATE jobs SET result = ?, rendered = ? WHERE id = ?",
                (
                    json.dumps(result, default=str) if result is not None else None,
                    json.dumps(rendered),
                    job_id,
                ),
            )
        with self._cond:
            self._cond.notify_all()

    def set_waiter(self, job_id: str, waiting: bool) -> None:
        """Record (or clear) this process as the one waiting for the job's result."""
        self._update(
            job_id,
            waiter_pid=self.pid if waiting else None,
            waiter_started=self.started if waiting else None,
        )

    def request_cancel(self, job_id: str) -> None:
        """Ask the job to stop, without waiting (safe inside a cancelled request)."""
        with self.store.transaction() as conn:
            conn.execute(
                "UPDATE jobs SET cancel_requested = 1 WHERE id = ? AND status = ?", (job_id, RUNNING)
            )
        with self._cond:
            handle = self._handles.get(job_id)
        if handle is not None:
            handle.cancel_event.set()

    def refresh(self, job_id: str) -> JobRecord:
        """The job's record; a job whose owning process died is marked interrupted first."""
        rec = self.get(job_id)
        if (
            rec.status == RUNNING
            and not self.is_local(job_id)
            and not owner_alive(rec.owner_pid, rec.owner_started)
        ):
            self.recover_interrupted()
            rec = self.get(job_id)
        return rec

    def get(self, job_id: str) -> JobRecord:
        rec = self._get_row(job_id)
        if rec is None:
            raise JobError(
                f"there is no job {job_id!r} in this workspace",
                "use the job_id a long-running tool returned (its result names it)",
            )
        return rec

    def list(self, limit: int = 50) -> list[JobRecord]:
        with self.store.connect() as conn:
            rows = conn.execute("SELECT * FROM jobs ORDER BY created_at DESC LIMIT ?", (limit,)).fetchall()
        return [record_from_row(r) for r in rows]

    def is_local(self, job_id: str) -> bool:
        with self._cond:
            return job_id in self._threads

    def wait(
        self,
        job_id: str,
        timeout_s: float,
        *,
        on_progress: Callable[[JobRecord], None] | None = None,
        cancel_event: threading.Event | None = None,
    ) -> JobRecord:
        """Wait until the job finishes or `timeout_s` passes; call `on_progress` for every step
        reported meanwhile (the record passed carries that step's progress)."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        rec = self.get(job_id)
        seen = self.progress_since(job_id, 0)[-1:]  # steps before the wait began are not replayed...
        last_seq = seen[0][0] - 1 if seen else 0  # ...except the current one
        while True:
            if on_progress is not None:
                for seq, done, total, message in self.progress_since(job_id, last_seq):
                    last_seq = seq
                    on_progress(
                        replace(rec, progress_done=done, progress_total=total, progress_message=message)
                    )
            remaining = deadline - time.monotonic()
            if rec.finished or remaining <= 0 or (cancel_event is not None and cancel_event.is_set()):
                return rec
            with self._cond:
                # Local jobs notify; jobs of another process are polled.
                self._cond.wait(min(remaining, 0.5 if self.is_local(job_id) else 0.25))
            rec = self.refresh(job_id)

    def cancel(self, job_id: str, wait_s: float = 30.0) -> JobRecord:
        """Ask the job to stop (killing its test's process tree) and wait for its cleanup."""
        rec = self.get(job_id)
        if rec.finished:
            return rec
        with self.store.transaction() as conn:
            conn.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?", (job_id,))
        with self._cond:
            handle = self._handles.get(job_id)
        if handle is not None:
            handle.cancel_event.set()
        return self.wait(job_id, wait_s)


def run_spawned(store: Store, job_id: str, fn: JobFn, wait_for_row_s: float = 30.0) -> str:
    """In a process started by `JobManager.spawn`: run the job here and return its final status."""
    _LIVE_JOBS.add(job_id)  # before any manager recovers, so the row is never taken for orphaned
    mgr = manager_for(store)
    deadline = time.monotonic() + wait_for_row_s
    while True:
        rec = mgr._get_row(job_id)
        if rec is not None and rec.owner_pid == os.getpid():
            break
        if time.monotonic() > deadline:
            _LIVE_JOBS.discard(job_id)
            raise JobError(f"job {job_id} was never registered for this process (pid {os.getpid()})")
        time.sleep(0.05)
    handle = JobHandle(mgr, job_id)
    with mgr._cond:
        mgr._handles[job_id] = handle
        mgr._threads[job_id] = threading.current_thread()
    mgr._run(handle, fn)
    return mgr.get(job_id).status


def runner_argv(module: str) -> list[str]:
    """The command line of a job process: this interpreter running `module`."""
    return [sys.executable, "-m", module]


def job_spans(store: Store, since: float) -> list[tuple[float, float]]:
    """When jobs ran since `since` (a running one: until now), read without writing (callers may hold a
    write transaction): time spent waiting on them. A job whose owner died counts for nothing."""
    now = time.time()
    with store.connect() as conn:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='jobs'").fetchone() is None:
            return []
        rows = conn.execute(
            "SELECT created_at, finished_at, owner_pid, owner_started FROM jobs "
            "WHERE finished_at IS NULL OR finished_at > ?",
            (since,),
        ).fetchall()
    out = []
    for r in rows:
        end = r["finished_at"]
        if end is None:
            end = now if owner_alive(int(r["owner_pid"]), float(r["owner_started"])) else r["created_at"]
        out.append((float(r["created_at"]), float(end)))
    return out


_managers: dict[str, JobManager] = {}
_managers_lock = threading.Lock()


def manager_for(store: Store) -> JobManager:
    """The process-wide job manager of a state store (created, migrated and recovered once)."""
    key = str(Path(store.path).resolve())
    with _managers_lock:
        mgr = _managers.get(key)
        if mgr is None:
            mgr = JobManager(store)
            _managers[key] = mgr
        return mgr

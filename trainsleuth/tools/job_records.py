"""What a background job is on record: its statuses, its rows in the workspace store, the
errors a job raises, and how to tell that the process that owns a row still lives.

Kept apart from the manager (`jobs.py`) so that code which only reads or raises about jobs (the
bisects, the long-running call machinery) need not know how jobs are run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

RUNNING = "running"
SUCCEEDED = "succeeded"
FAILED = "failed"
CANCELLED = "cancelled"
INTERRUPTED = "interrupted"
FINAL_STATUSES = frozenset({SUCCEEDED, FAILED, CANCELLED, INTERRUPTED})


MIGRATIONS = [
    """
    CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        title TEXT NOT NULL DEFAULT '',
        params TEXT NOT NULL DEFAULT '{}',
        status TEXT NOT NULL,
        created_at REAL NOT NULL,
        finished_at REAL,
        owner_pid INTEGER NOT NULL,
        owner_started REAL NOT NULL,
        progress_done REAL NOT NULL DEFAULT 0,
        progress_total REAL,
        progress_message TEXT,
        current TEXT,
        result TEXT,
        error TEXT,
        next_step TEXT,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        cleanup TEXT NOT NULL DEFAULT '[]'
    );
    CREATE INDEX jobs_status ON jobs(status);
    """,
    """
    ALTER TABLE jobs ADD COLUMN waiter_pid INTEGER;
    ALTER TABLE jobs ADD COLUMN waiter_started REAL;
    ALTER TABLE jobs ADD COLUMN rendered TEXT;
    ALTER TABLE jobs ADD COLUMN log_path TEXT;
    """,
    """
    CREATE TABLE job_progress (
        job_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        done REAL NOT NULL,
        total REAL,
        message TEXT,
        current TEXT,
        PRIMARY KEY (job_id, seq)
    );
    """,
]


class JobError(Exception):
    """An expected failure of a job or of a request about one; carries the next step."""

    def __init__(self, message: str, next_step: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.next_step = next_step


class JobCancelled(Exception):
    """Raised inside a job function when it notices that it was cancelled."""


@dataclass
class JobRecord:
    id: str
    kind: str
    title: str
    status: str
    created_at: float
    finished_at: float | None
    owner_pid: int
    progress_done: float
    progress_total: float | None
    progress_message: str | None
    current: str | None
    result: dict[str, Any] | None
    error: str | None
    next_step: str | None
    params: dict[str, Any] = field(default_factory=dict)
    cleanup: list[dict[str, str]] = field(default_factory=list)
    # A job run for a tool call: its text rendering and images (base64), beside `result`.
    rendered: dict[str, Any] | None = None
    log_path: str | None = None
    owner_started: float = 0.0

    @property
    def finished(self) -> bool:
        return self.status in FINAL_STATUSES

    def progress_key(self) -> tuple[Any, ...]:
        return (self.progress_done, self.progress_total, self.progress_message, self.current)


def record_from_row(row: Any) -> JobRecord:
    return JobRecord(
        id=row["id"],
        kind=row["kind"],
        title=row["title"],
        status=row["status"],
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        owner_pid=row["owner_pid"],
        progress_done=row["progress_done"],
        progress_total=row["progress_total"],
        progress_message=row["progress_message"],
        current=row["current"],
        result=json.loads(row["result"]) if row["result"] else None,
        error=row["error"],
        next_step=row["next_step"],
        params=json.loads(row["params"] or "{}"),
        cleanup=json.loads(row["cleanup"] or "[]"),
        rendered=json.loads(row["rendered"]) if row["rendered"] else None,
        log_path=row["log_path"],
        owner_started=row["owner_started"],
    )


# ---------------------------------------------------------------------------- process identity


def process_start_time(pid: int) -> float | None:
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, OSError):
        return None


def owner_alive(pid: int, started: float) -> bool:
    """True when `pid` is still the process that started at `started` (pids are reused)."""
    import psutil

    now_started = process_start_time(pid)
    if now_started is None or abs(now_started - started) >= 1.0:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, OSError):
        return False

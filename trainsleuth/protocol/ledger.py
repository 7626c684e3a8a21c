"""The protocol's tables (migration list), sealed transactions and the evidence ledger.

Every protocol write goes through `sealed_tx`, every read through `sealed_read`: both check the seal
(`state/seal.py`) first, so state the server did not write is refused, never used. Analysis tools
store their results through `record_tool_evidence` (on the investigation named, or on the one open
investigation of the workspace); the state machine lives in `protocol/machine.py`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from trainsleuth.state import seal
from trainsleuth.state.location import marker_path, read_marker, write_marker
from trainsleuth.state.store import Store

COMPONENT = "protocol"

MIGRATIONS: list[str] = [
    """
    CREATE TABLE investigations (
        id TEXT PRIMARY KEY,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        workspace TEXT NOT NULL,
        symptom TEXT NOT NULL,
        pathway TEXT NOT NULL,
        phase TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX investigations_by_phase ON investigations(phase, updated_at);
    CREATE TABLE evidence (
        id TEXT PRIMARY KEY,
        investigation_id TEXT NOT NULL REFERENCES investigations(id),
        created_at REAL NOT NULL,
        source TEXT NOT NULL,
        summary TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX evidence_by_investigation ON evidence(investigation_id, created_at);
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        investigation_id TEXT NOT NULL REFERENCES investigations(id),
        at REAL NOT NULL,
        kind TEXT NOT NULL,
        phase TEXT NOT NULL,
        summary TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX events_by_investigation ON events(investigation_id, seq);
    CREATE TABLE hypotheses (
        id TEXT PRIMARY KEY,
        investigation_id TEXT NOT NULL REFERENCES investigations(id),
        created_at REAL NOT NULL,
        round INTEGER NOT NULL,
        rank INTEGER NOT NULL,
        status TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX hypotheses_by_investigation ON hypotheses(investigation_id, round, rank);
    CREATE TABLE diagnoses (
        id TEXT PRIMARY KEY,
        investigation_id TEXT NOT NULL REFERENCES investigations(id),
        created_at REAL NOT NULL,
        status TEXT NOT NULL,
        confidence REAL NOT NULL,
        root_cause_key TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX diagnoses_by_investigation ON diagnoses(investigation_id, created_at);
    CREATE TABLE reviews (
        id TEXT PRIMARY KEY,
        investigation_id TEXT NOT NULL REFERENCES investigations(id),
        diagnosis_id TEXT NOT NULL REFERENCES diagnoses(id),
        created_at REAL NOT NULL,
        verdict TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE TABLE fix_attempts (
        id TEXT PRIMARY KEY,
        investigation_id TEXT NOT NULL REFERENCES investigations(id),
        diagnosis_id TEXT NOT NULL REFERENCES diagnoses(id),
        number INTEGER NOT NULL,
        created_at REAL NOT NULL,
        finished_at REAL,
        status TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX fix_attempts_by_investigation ON fix_attempts(investigation_id, number);
    """,
    # v2 (issue 15): the seal, workspace settings (approval policy, RCA folder), one-time approval
    # codes, problems (strikes follow the problem across linked investigations), short-id counters.
    # No IF NOT EXISTS: a database that claims v1 but already has these tables is refused, not re-sealed.
    """
    CREATE TABLE seal (id INTEGER PRIMARY KEY CHECK (id = 1), digest TEXT NOT NULL);
    CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE person_requests (
        id TEXT PRIMARY KEY,
        purpose TEXT NOT NULL,
        investigation_id TEXT NOT NULL,
        target TEXT NOT NULL,
        text TEXT NOT NULL,
        digest TEXT NOT NULL,
        shown_on TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        tries INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL DEFAULT 'pending',
        decided_by TEXT,
        decided_at REAL,
        words TEXT,
        channel TEXT
    );
    CREATE TABLE problems (
        id TEXT PRIMARY KEY,
        created_at REAL NOT NULL,
        epoch INTEGER NOT NULL DEFAULT 1,
        halted INTEGER NOT NULL DEFAULT 0,
        data TEXT NOT NULL
    );
    CREATE TABLE counters (name TEXT PRIMARY KEY, n INTEGER NOT NULL);
    """,
]
SEALED_FROM = 2  # schema version from which every write is sealed


class ProtocolError(Exception):
    """A protocol rule refused the request; `next_step` tells the assistant what to do instead."""

    def __init__(self, message: str, next_step: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.next_step = next_step


class StateAltered(ProtocolError):
    """The state does not match its seal: nothing is read from it and nothing is allowed."""

    def __init__(self, problem: str) -> None:
        super().__init__(
            f"the trainsleuth state of this workspace was altered outside trainsleuth: {problem}. The protocol "
            "and the edit gate stay closed until a person has looked at it",
            "ask the person to run `trainsleuth state show` (what is there) and, if they accept the state as "
            "it is, `trainsleuth state accept` in their own terminal",
        )
        self.problem = problem


_READY: set[str] = set()
_READY_LOCK = threading.Lock()


def ensure_schema(store: Store) -> None:
    """Create or upgrade the protocol's tables, seal them, and mark the workspace. Refuses altered state."""
    ident = str(store.path)
    if ident in _READY and store.path.exists():
        return
    with _READY_LOCK:
        key = seal.load_key(create=True)
        version = store.schema_version(COMPONENT)
        if version >= SEALED_FROM:
            with store.connect() as conn:
                problem = seal.problem(conn, key)
            if problem:
                raise StateAltered(problem)
        elif version == 0 and store.workspace is not None:
            marker = read_marker(store.workspace)
            if marker is not None and (not marker or marker.get("state") == str(store.path)):
                # The workspace says its state existed: never start a fresh one silently in its place.
                raise StateAltered(
                    f"the state database {store.path} is missing or empty, but the workspace's marker "
                    f"({marker_path(store.workspace)}) says investigations were kept there"
                )
        store.migrate(COMPONENT, MIGRATIONS)
        if version < len(MIGRATIONS):
            assert key is not None
            with store.transaction() as conn:
                seal.write(conn, key)
        if store.workspace is not None:
            write_marker(store.workspace, store.path)
        _READY.add(ident)


def _key() -> bytes | None:
    try:
        return seal.load_key(create=False)
    except seal.SealError as exc:
        raise StateAltered(str(exc)) from exc


@contextmanager
def sealed_tx(store: Store) -> Iterator[sqlite3.Connection]:
    """A write transaction on checked state; the seal is rewritten before it commits."""
    ensure_schema(store)
    key = _key()
    with store.transaction() as conn:
        problem = seal.problem(conn, key)
        if problem:
            raise StateAltered(problem)
        yield conn
        assert key is not None
        seal.write(conn, key)


@contextmanager
def sealed_read(store: Store) -> Iterator[sqlite3.Connection]:
    """A consistent read of checked state (one snapshot)."""
    ensure_schema(store)
    key = _key()
    with store.connect() as conn:
        conn.execute("BEGIN")
        try:
            problem = seal.problem(conn, key)
            if problem:
                raise StateAltered(problem)
            yield conn
        finally:
            conn.execute("ROLLBACK")


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


_SHORT_TABLES = {"e": "evidence", "h": "hypotheses", "d": "diagnoses", "a": "fix_attempts", "r": "reviews"}


def short_id(conn: sqlite3.Connection, prefix: str) -> str:
    """The next short id of a kind (e1, e2, ... for evidence): easy to read and to cite. Never one that
    is taken (a migrated or merged database may hold ids the counter has not seen)."""
    table = _SHORT_TABLES.get(prefix)
    while True:
        conn.execute(
            "INSERT INTO counters(name, n) VALUES(?, 1) ON CONFLICT(name) DO UPDATE SET n = n + 1", (prefix,)
        )
        n = conn.execute("SELECT n FROM counters WHERE name = ?", (prefix,)).fetchone()[0]
        candidate = f"{prefix}{n}"
        if (
            table is None
            or conn.execute(f"SELECT 1 FROM {table} WHERE id = ?", (candidate,)).fetchone() is None
        ):
            return candidate


def dumps(data: Any) -> str:
    return json.dumps(data, default=str, sort_keys=True)


DONE = ("resolved", "closed", "abandoned")


def open_investigations(store: Store) -> list[str]:
    """Ids of the investigations not yet resolved, closed or abandoned (most recently active first)."""
    with sealed_read(store) as conn:
        rows = conn.execute(
            "SELECT id FROM investigations WHERE phase NOT IN (?, ?, ?) ORDER BY updated_at DESC", DONE
        ).fetchall()
    return [r["id"] for r in rows]


def insert_evidence(
    conn: sqlite3.Connection, investigation_id: str, source: str, summary: str, data: Any, phase: str
) -> str:
    """Add one evidence row and its timeline event (inside the caller's sealed transaction)."""
    evidence_id = short_id(conn, "e")
    now = time.time()
    conn.execute(
        "INSERT INTO evidence(id, investigation_id, created_at, source, summary, data) VALUES(?,?,?,?,?,?)",
        (evidence_id, investigation_id, now, source, summary[:2000], dumps(data)),
    )
    conn.execute(
        "INSERT INTO events(investigation_id, at, kind, phase, summary, data) VALUES(?,?,?,?,?,?)",
        (
            investigation_id,
            now,
            "evidence",
            phase,
            f"evidence {evidence_id} from {source}: {summary[:200]}",
            dumps({"evidence_id": evidence_id, "source": source}),
        ),
    )
    conn.execute("UPDATE investigations SET updated_at = ? WHERE id = ?", (now, investigation_id))
    return evidence_id


def record_tool_evidence(store: Store, investigation_id: str, source: str, summary: str, data: Any) -> str:
    """Store an analysis result as evidence on an investigation and return the evidence id."""
    with sealed_tx(store) as conn:
        row = conn.execute("SELECT phase FROM investigations WHERE id = ?", (investigation_id,)).fetchone()
        if row is None:
            raise ProtocolError(
                f"investigation {investigation_id!r} does not exist in this workspace",
                next_step="call list_investigations, or start_investigation to open one",
            )
        if row["phase"] in ("closed", "abandoned"):
            raise ProtocolError(
                f"investigation {investigation_id} is {row['phase']}: it takes no more evidence",
                next_step="leave out investigation_id, or start_investigation for a new problem",
            )
        return insert_evidence(conn, investigation_id, source, summary, data, row["phase"])


def record_open_evidence(store: Store, source: str, summary: str, data: Any) -> tuple[str | None, str]:
    """Attach an analysis result to the workspace's one open investigation, if there is exactly one.

    Returns (evidence id or None, a note saying what happened) so the caller can tell the assistant."""
    open_ids = open_investigations(store)
    if not open_ids:
        return None, ""
    if len(open_ids) > 1:
        return None, (
            f"not stored as evidence: {len(open_ids)} investigations are open ({', '.join(open_ids[:5])}); "
            "pass investigation_id to choose one"
        )
    evidence_id = record_tool_evidence(store, open_ids[0], source, summary, data)
    return evidence_id, f"stored as evidence {evidence_id} on the open investigation {open_ids[0]}"

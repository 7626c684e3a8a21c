"""The protocol's tables (migration list) and the evidence ledger.

Every analysis tool called with `investigation_id` stores its result through
`record_tool_evidence`; the investigation state machine lives in `protocol/machine.py`.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from trainsleuth.protocol.store import Store

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
]


class ProtocolError(Exception):
    """A protocol rule refused the request; `next_step` tells the assistant what to do instead."""

    def __init__(self, message: str, next_step: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.next_step = next_step


def ensure_schema(store: Store) -> None:
    store.migrate(COMPONENT, MIGRATIONS)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def dumps(data: Any) -> str:
    return json.dumps(data, default=str, sort_keys=True)


def record_tool_evidence(store: Store, investigation_id: str, source: str, summary: str, data: Any) -> str:
    """Store an analysis result as evidence on an investigation and return the evidence id."""
    ensure_schema(store)
    evidence_id = new_id("ev")
    now = time.time()
    with store.transaction() as conn:
        row = conn.execute("SELECT phase FROM investigations WHERE id = ?", (investigation_id,)).fetchone()
        if row is None:
            raise ProtocolError(
                f"investigation {investigation_id!r} does not exist in this workspace",
                next_step="call list_investigations, or start_investigation to open one",
            )
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
                row["phase"],
                f"evidence {evidence_id} from {source}: {summary[:200]}",
                dumps({"evidence_id": evidence_id, "source": source}),
            ),
        )
        conn.execute("UPDATE investigations SET updated_at = ? WHERE id = ?", (now, investigation_id))
    return evidence_id

"""Evidence storage used by every analysis tool called with `investigation_id`.

The protocol issue grows this into the full investigation state machine; the contract used by
the tool layer is only `record_tool_evidence`.
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
        data TEXT NOT NULL
    );
    CREATE TABLE evidence (
        id TEXT PRIMARY KEY,
        investigation_id TEXT NOT NULL REFERENCES investigations(id),
        created_at REAL NOT NULL,
        source TEXT NOT NULL,
        summary TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX evidence_by_investigation ON evidence(investigation_id, created_at);
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


def record_tool_evidence(store: Store, investigation_id: str, source: str, summary: str, data: Any) -> str:
    """Store an analysis result as evidence on an investigation and return the evidence id."""
    ensure_schema(store)
    evidence_id = "ev-" + uuid.uuid4().hex[:10]
    with store.transaction() as conn:
        row = conn.execute("SELECT id FROM investigations WHERE id = ?", (investigation_id,)).fetchone()
        if row is None:
            raise ProtocolError(
                f"investigation {investigation_id!r} does not exist in this workspace",
                next_step="call list_investigations, or start_investigation to open one",
            )
        conn.execute(
            "INSERT INTO evidence(id, investigation_id, created_at, source, summary, data) VALUES(?,?,?,?,?,?)",
            (evidence_id, investigation_id, time.time(), source, summary, json.dumps(data, default=str)),
        )
    return evidence_id

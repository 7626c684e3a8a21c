"""Read models of the state (pydantic views), built from rows inside one sealed read."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from trainsleuth.protocol.models import (
    Approval,
    AttemptView,
    DiagnosisView,
    EvidenceItem,
    HypothesisView,
    Reproduction,
    ReviewView,
    TimelineEvent,
)


def hypotheses(conn: sqlite3.Connection, inv_id: str) -> list[HypothesisView]:
    out = []
    for r in conn.execute(
        "SELECT * FROM hypotheses WHERE investigation_id=? ORDER BY round, rank", (inv_id,)
    ):
        data = json.loads(r["data"])
        out.append(HypothesisView(id=r["id"], round=r["round"], rank=r["rank"], status=r["status"], **data))
    return out


def reviews(conn: sqlite3.Connection, diag_id: str) -> list[ReviewView]:
    return [
        ReviewView(
            id=r["id"],
            diagnosis_id=diag_id,
            verdict=r["verdict"],
            created_at=r["created_at"],
            **json.loads(r["data"]),
        )
        for r in conn.execute("SELECT * FROM reviews WHERE diagnosis_id=? ORDER BY created_at", (diag_id,))
    ]


_DIAG_PRIVATE = ("approval", "amendments", "reproduction", "fingerprint", "settled_by", "problem_id")


def diagnosis_view(conn: sqlite3.Connection, d: dict[str, Any], strikes: int) -> DiagnosisView:
    data = dict(d["data"])
    private = {k: data.pop(k, None) for k in _DIAG_PRIVATE}
    repro = private["reproduction"]
    return DiagnosisView(
        id=d["id"],
        status=d["status"],
        created_at=d["created_at"],
        approval=Approval(**private["approval"]) if private["approval"] else None,
        amendments=[Approval(**a) for a in private["amendments"] or []],
        reproduction=Reproduction(**repro) if repro else None,
        settled_by=list(private["settled_by"] or []),
        reviews=reviews(conn, d["id"]),
        failed_attempts=strikes,
        **data,
    )


def attempts(conn: sqlite3.Connection, inv_id: str, attempt_id: str | None = None) -> list[AttemptView]:
    sql = "SELECT * FROM fix_attempts WHERE investigation_id=?"
    params: tuple[Any, ...] = (inv_id,)
    if attempt_id:
        sql += " AND id=?"
        params += (attempt_id,)
    out = []
    for r in conn.execute(sql + " ORDER BY created_at", params):
        data = json.loads(r["data"])
        snap = data.get("snapshot") or {}
        out.append(
            AttemptView(
                id=r["id"],
                diagnosis_id=r["diagnosis_id"],
                number=r["number"],
                description=data.get("description", ""),
                status=r["status"],
                created_at=r["created_at"],
                finished_at=r["finished_at"],
                base_head=snap.get("head"),
                snapshot_ref=snap.get("ref"),
                was_dirty=bool(snap.get("dirty")),
                changed_files=data.get("changed_files") or [],
                diff=data.get("diff"),
                exit_code=data.get("exit_code"),
                timed_out=bool(data.get("timed_out")),
                output_tail=data.get("output_tail"),
                evidence_id=data.get("evidence_id"),
                warnings=data.get("warnings") or [],
                reverted=data.get("reverted") or [],
                learned=data.get("learned"),
                unapproved=data.get("unapproved") or [],
                repeats=data.get("repeats"),
            )
        )
    return out


def evidence(conn: sqlite3.Connection, inv_id: str) -> list[EvidenceItem]:
    return [
        EvidenceItem(
            id=r["id"],
            source=r["source"],
            summary=r["summary"],
            created_at=r["created_at"],
            data=json.loads(r["data"]),
        )
        for r in conn.execute(
            "SELECT * FROM evidence WHERE investigation_id=? ORDER BY created_at, rowid", (inv_id,)
        )
    ]


def timeline(conn: sqlite3.Connection, inv_id: str, iso: Any) -> list[TimelineEvent]:
    return [
        TimelineEvent(
            seq=r["seq"],
            at=r["at"],
            at_iso=iso(r["at"]),
            kind=r["kind"],
            phase=r["phase"],
            summary=r["summary"],
            data=json.loads(r["data"]),
        )
        for r in conn.execute("SELECT * FROM events WHERE investigation_id=? ORDER BY seq", (inv_id,))
    ]

"""Strikes follow the problem, not the investigation id or the wording.

A *problem* groups the investigations of one underlying fault. Every investigation starts as its own
problem; it is linked to an earlier one (and shares its strikes and its halt) when

- it is opened while an unresolved investigation describes a similar symptom or names the same
  reproducer (`similar_symptoms`), or
- its diagnosis proposes to change files that failed fix attempts of an unresolved investigation changed,

unless the person agrees to start it fresh. Strikes are the failed fix attempts on the problem in its
current *epoch*: three halt every open investigation of the problem; only a diagnosis with a different
root cause, approved by the person, starts a new epoch. Rewording a diagnosis does not reset the count,
and an attempt whose diff repeats one that already failed is recognised by its diff, not its description.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import sqlite3
from typing import Any

MAX_STRIKES = 3

_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "from",
        "with",
        "after",
        "before",
        "when",
        "then",
        "than",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "becomes",
        "become",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "our",
        "my",
        "we",
        "i",
        "not",
        "no",
        "into",
        "out",
        "up",
        "down",
        "over",
        "under",
        "during",
        "since",
        "while",
        "about",
    ]
)


def normalise(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def _tokens(text: str) -> set[str]:
    return {w for w in normalise(text).split() if len(w) > 1 and w not in _STOP}


def same_root_cause(a: str, b: str) -> bool:
    na, nb = normalise(a), normalise(b)
    if na == nb:
        return True
    return difflib.SequenceMatcher(None, na, nb).ratio() >= 0.85


def similar_symptoms(a: str, b: str) -> bool:
    ta, tb = _tokens(a), _tokens(b)
    if not ta or not tb:
        return False
    jaccard = len(ta & tb) / len(ta | tb)
    return jaccard >= 0.5 or difflib.SequenceMatcher(None, normalise(a), normalise(b)).ratio() >= 0.8


def diff_signature(diff: str | None) -> str | None:
    """A fingerprint of what a diff changes (its added and removed lines, whitespace-insensitive)."""
    if not diff:
        return None
    lines = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            continue
        if line.startswith(("+", "-")):
            body = " ".join(line[1:].split())
            if body:
                lines.append(line[0] + body)
    if not lines:
        return None
    return hashlib.sha256("\n".join(lines).encode("utf-8", "surrogateescape")).hexdigest()[:24]


# ---------------------------------------------------------------------------- problems


def ensure_problem(conn: sqlite3.Connection, problem_id: str, now: float) -> dict[str, Any]:
    row = conn.execute("SELECT * FROM problems WHERE id=?", (problem_id,)).fetchone()
    if row is None:
        conn.execute(
            "INSERT INTO problems(id, created_at, epoch, halted, data) VALUES(?,?,1,0,'{}')",
            (problem_id, now),
        )
        row = conn.execute("SELECT * FROM problems WHERE id=?", (problem_id,)).fetchone()
    out = dict(row)
    out["data"] = json.loads(out["data"])
    return out


def save_problem(conn: sqlite3.Connection, problem: dict[str, Any]) -> None:
    conn.execute(
        "UPDATE problems SET epoch=?, halted=?, data=? WHERE id=?",
        (problem["epoch"], problem["halted"], json.dumps(problem["data"], sort_keys=True), problem["id"]),
    )


def count(conn: sqlite3.Connection, problem_id: str, epoch: int) -> int:
    row = conn.execute(
        "SELECT COUNT(*) AS n FROM fix_attempts WHERE status='failed' "
        "AND json_extract(data, '$.problem_id') = ? AND json_extract(data, '$.epoch') = ?",
        (problem_id, epoch),
    ).fetchone()
    return int(row["n"])


def failed_signatures(conn: sqlite3.Connection, problem_id: str) -> dict[str, str]:
    """Diff signature -> attempt id, for every failed attempt on the problem (all epochs)."""
    out: dict[str, str] = {}
    for r in conn.execute(
        "SELECT id, data FROM fix_attempts WHERE status='failed' AND json_extract(data, '$.problem_id') = ? "
        "ORDER BY created_at",
        (problem_id,),
    ):
        sig = json.loads(r["data"]).get("diff_signature")
        if sig and sig not in out:
            out[sig] = r["id"]
    return out


def struck_causes(problem: dict[str, Any]) -> list[dict[str, Any]]:
    return list(problem["data"].get("struck") or [])


def open_investigations(conn: sqlite3.Connection, exclude: str | None = None) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT id, symptom, phase, data FROM investigations WHERE phase NOT IN "
        "('resolved', 'closed', 'abandoned') ORDER BY created_at"
    ).fetchall()
    out = []
    for r in rows:
        if r["id"] == exclude:
            continue
        data = json.loads(r["data"])
        out.append(
            {
                "id": r["id"],
                "symptom": r["symptom"],
                "phase": r["phase"],
                "problem_id": data.get("problem_id") or r["id"],
                "reproducer": data.get("reproducer"),
            }
        )
    return out


def link_candidate_at_start(
    conn: sqlite3.Connection, symptom: str, reproducer: str | None
) -> tuple[dict[str, Any], str] | None:
    """An unresolved investigation of what looks like the same problem, and why."""
    for other in reversed(open_investigations(conn)):
        if reproducer and other["reproducer"] and normalise(reproducer) == normalise(other["reproducer"]):
            return other, f"it names the same reproducer as {other['id']}"
        if similar_symptoms(symptom, other["symptom"]):
            return other, f"its symptom matches {other['id']} ({other['symptom'][:80]})"
    return None


def link_candidate_by_files(
    conn: sqlite3.Connection, inv_id: str, problem_id: str, files: list[str]
) -> tuple[str, str] | None:
    """(problem id, reason) of an unresolved investigation whose failed attempts changed these files."""
    wanted = set(files)
    if not wanted:
        return None
    for other in open_investigations(conn, exclude=inv_id):
        if other["problem_id"] == problem_id:
            continue
        for r in conn.execute(
            "SELECT data FROM fix_attempts WHERE investigation_id=? AND status='failed'", (other["id"],)
        ):
            touched = set(json.loads(r["data"]).get("changed_files") or [])
            overlap = sorted(wanted & touched)
            if overlap:
                return other["problem_id"], (
                    f"its fix changes {', '.join(overlap[:5])}, which failed fix attempts of {other['id']} changed"
                )
    return None


def investigations_of(conn: sqlite3.Connection, problem_id: str) -> list[str]:
    return [
        r["id"]
        for r in conn.execute(
            "SELECT id FROM investigations WHERE COALESCE(json_extract(data, '$.problem_id'), id) = ?",
            (problem_id,),
        )
    ]


def merge_into(conn: sqlite3.Connection, inv_id: str, old_problem: str, new_problem: dict[str, Any]) -> None:
    """Move an investigation (and its attempts of the old problem's current epoch) onto another problem."""
    old = conn.execute("SELECT epoch FROM problems WHERE id=?", (old_problem,)).fetchone()
    old_epoch = int(old["epoch"]) if old is not None else 1
    conn.execute(
        "UPDATE fix_attempts SET data = json_set(data, '$.problem_id', ?, '$.epoch', ?) "
        "WHERE investigation_id = ? AND COALESCE(json_extract(data, '$.epoch'), 1) = ?",
        (new_problem["id"], new_problem["epoch"], inv_id, old_epoch),
    )
    # Attempts of the old problem's earlier epochs stay history (epoch 0 never counts).
    conn.execute(
        "UPDATE fix_attempts SET data = json_set(data, '$.problem_id', ?, '$.epoch', 0) "
        "WHERE investigation_id = ? AND COALESCE(json_extract(data, '$.problem_id'), '') != ?",
        (new_problem["id"], inv_id, new_problem["id"]),
    )

"""A person's decisions without a dialog: requests the assistant cannot complete on its own.

When the client cannot show the person a dialog (no elicitation), the server records a *request* (approve
this diagnosis or amendment, abandon this investigation, start this one fresh) with its text, and the
person decides it in one of two ways, each recorded as the approval's path:

- **terminal**: the person runs `trainsleuth approve` in their own terminal; it shows the pending
  requests and records their typed decision (it refuses to run without a terminal on stdin and stdout);
- **one_time_code**: the server shows the request and a fresh code on a channel that is not a tool result
  and not its stderr (its controlling terminal, a desktop notification, or a configured notifier); the
  person gives the code to the assistant, which passes it back.

Requests and codes are single-use, bound to one decision, expire (15 minutes undecided, an hour once
decided in the terminal), and a code dies after 5 wrong tries. Only a code's hash is kept.

Workspace settings live beside them in the sealed state: the approval policy (`elicitation_only`, set by
`trainsleuth serve --elicitation-only` or `trainsleuth state set approval elicitation-only`, applies to
every server on the workspace) and the RCA folder.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sqlite3
import time
from dataclasses import dataclass

from trainsleuth.protocol.ledger import new_id

REQUEST_TTL_S = 15 * 60
DECIDED_TTL_S = 60 * 60
MAX_TRIES = 5

APPROVAL_POLICY = "approval"  # settings key: "any" (default) or "elicitation_only"
RCA_DIR = "rca_dir"  # settings key: where RCA documents go (default .trainsleuth/rca)


@dataclass
class Request:
    id: str
    purpose: str
    investigation_id: str
    target: str
    text: str
    shown_on: str
    created_at: float
    status: str
    decided_by: str | None = None
    words: str | None = None
    channel: str | None = None


def launcher(pid: int | None = None) -> str:
    """Who started a process (its parent's command line): recorded with a decision, so a server the
    assistant started itself, or a terminal it drove, stands out in the audit trail."""
    try:
        import psutil

        parent = psutil.Process(pid if pid is not None else os.getppid())
        cmd = " ".join(parent.cmdline()) or parent.name()
    except Exception:
        return "an unknown process"
    return cmd if len(cmd) <= 120 else cmd[:117] + "..."


def _digest(code: str, salt: str) -> str:
    return hashlib.sha256(f"{salt}:{normalise(code)}".encode()).hexdigest()


def normalise(code: str) -> str:
    return "".join(ch for ch in code if ch.isdigit())


def _request(row: sqlite3.Row) -> Request:
    return Request(
        id=row["id"],
        purpose=row["purpose"],
        investigation_id=row["investigation_id"],
        target=row["target"],
        text=row["text"],
        shown_on=row["shown_on"],
        created_at=row["created_at"],
        status=row["status"],
        decided_by=row["decided_by"],
        words=row["words"],
        channel=row["channel"],
    )


def issue(
    conn: sqlite3.Connection, purpose: str, investigation_id: str, target: str, text: str, shown_on: str
) -> tuple[str, str]:
    """A fresh request (and its code) for one decision; earlier pending ones for it are withdrawn.
    Returns (request id, code)."""
    conn.execute(
        "UPDATE person_requests SET status = 'withdrawn' WHERE purpose=? AND investigation_id=? AND target=? "
        "AND status = 'pending'",
        (purpose, investigation_id, target),
    )
    code = f"{secrets.randbelow(10**4):04d}-{secrets.randbelow(10**4):04d}"
    request_id = new_id("req")
    now = time.time()
    conn.execute(
        "INSERT INTO person_requests(id, purpose, investigation_id, target, text, digest, shown_on, created_at, "
        "expires_at) VALUES(?,?,?,?,?,?,?,?,?)",
        (request_id, purpose, investigation_id, target, text, _digest(code, request_id), shown_on, now,
         now + REQUEST_TTL_S),
    )  # fmt: skip
    return request_id, code


def redeem(
    conn: sqlite3.Connection, purpose: str, investigation_id: str, target: str, code: str
) -> tuple[str | None, str]:
    """(None, where it was shown) when `code` is the live code for this decision (it is used up); else
    (why it is refused, "")."""
    row = conn.execute(
        "SELECT * FROM person_requests WHERE purpose=? AND investigation_id=? AND target=? AND status='pending' "
        "ORDER BY created_at DESC LIMIT 1",
        (purpose, investigation_id, target),
    ).fetchone()
    if row is None:
        return (
            "no approval code is pending for this decision (none was issued, or it was used or withdrawn)",
            "",
        )
    now = time.time()
    if now > row["expires_at"]:
        conn.execute("UPDATE person_requests SET status = 'expired' WHERE id = ?", (row["id"],))
        return "the approval code has expired (codes live 15 minutes)", ""
    if not secrets.compare_digest(_digest(code, row["id"]), row["digest"]):
        tries = int(row["tries"]) + 1
        burned = tries >= MAX_TRIES
        conn.execute(
            "UPDATE person_requests SET tries = ?, status = ? WHERE id = ?",
            (tries, "withdrawn" if burned else "pending", row["id"]),
        )
        return "the approval code is wrong" + (" (5 wrong tries: it is withdrawn)" if burned else ""), ""
    conn.execute("UPDATE person_requests SET status = 'used', decided_at = ? WHERE id = ?", (now, row["id"]))
    return None, str(row["shown_on"] or "")


def pending(conn: sqlite3.Connection) -> list[Request]:
    """Requests waiting for the person (newest first)."""
    now = time.time()
    rows = conn.execute(
        "SELECT * FROM person_requests WHERE status = 'pending' AND expires_at >= ? ORDER BY created_at DESC",
        (now,),
    ).fetchall()
    return [_request(r) for r in rows]


def decide_in_terminal(
    conn: sqlite3.Connection, request_id: str, decision: str, by: str, words: str | None, channel: str
) -> None:
    conn.execute(
        "UPDATE person_requests SET status = ?, decided_by = ?, decided_at = ?, words = ?, channel = ?, "
        "expires_at = ? WHERE id = ? AND status = 'pending'",
        (f"decided:{decision}", by, time.time(), words, channel, time.time() + DECIDED_TTL_S, request_id),
    )


def take_decision(
    conn: sqlite3.Connection, purpose: str, investigation_id: str, target: str
) -> Request | None:
    """A decision the person made in their terminal for exactly this request, used up as it is taken."""
    row = conn.execute(
        "SELECT * FROM person_requests WHERE purpose=? AND investigation_id=? AND target=? "
        "AND status LIKE 'decided:%' AND expires_at >= ? ORDER BY decided_at DESC LIMIT 1",
        (purpose, investigation_id, target, time.time()),
    ).fetchone()
    if row is None:
        return None
    conn.execute("UPDATE person_requests SET status = 'used' WHERE id = ?", (row["id"],))
    req = _request(row)
    req.status = str(row["status"]).removeprefix("decided:")
    return req


def is_pending(conn: sqlite3.Connection, purpose: str, investigation_id: str, target: str) -> bool:
    """Whether the person still has this exact request in front of them, undecided."""
    row = conn.execute(
        "SELECT 1 FROM person_requests WHERE purpose=? AND investigation_id=? AND target=? "
        "AND status = 'pending' AND expires_at >= ? LIMIT 1",
        (purpose, investigation_id, target, time.time()),
    ).fetchone()
    return row is not None


def get_setting(conn: sqlite3.Connection, key: str, default: str | None = None) -> str | None:
    row = conn.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
    return str(row["value"]) if row is not None else default


def set_setting(conn: sqlite3.Connection, key: str, value: str | None) -> None:
    if value is None:
        conn.execute("DELETE FROM settings WHERE key = ?", (key,))
    else:
        conn.execute(
            "INSERT INTO settings(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

"""One-time approval codes: the fallback a person completes, and the assistant cannot on its own.

When the client cannot show the person a dialog (no elicitation), the server prints the decision to be
made and a fresh code on its own stderr (and its terminal, when it has one), never in a tool result.
The person reads both there and, if they agree, gives the code to the assistant, which passes it back.
Codes are single-use, bound to one decision (approve this diagnosis, abandon this investigation, start
this investigation fresh), expire after 15 minutes, and die after 5 wrong tries. Only their hash is kept.

Workspace settings live beside them in the sealed state: the approval policy (`elicitation_only`, set
by `trainsleuth serve --elicitation-only` or `trainsleuth state set approval elicitation-only`, applies to
every server on the workspace) and the RCA folder.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
import time

from trainsleuth.protocol.ledger import new_id

CODE_TTL_S = 15 * 60
MAX_TRIES = 5

APPROVAL_POLICY = "approval"  # settings key: "any" (default) or "elicitation_only"
RCA_DIR = "rca_dir"  # settings key: where RCA documents go (default .trainsleuth/rca)


def _digest(code: str, salt: str) -> str:
    return hashlib.sha256(f"{salt}:{normalise(code)}".encode()).hexdigest()


def normalise(code: str) -> str:
    return "".join(ch for ch in code if ch.isdigit())


def issue(conn: sqlite3.Connection, purpose: str, investigation_id: str, target: str) -> str:
    """A fresh code for one decision (earlier unused codes for it are withdrawn)."""
    conn.execute(
        "UPDATE approval_codes SET used_at = -1 WHERE purpose=? AND investigation_id=? AND target=? "
        "AND used_at IS NULL",
        (purpose, investigation_id, target),
    )
    code = f"{secrets.randbelow(10**4):04d}-{secrets.randbelow(10**4):04d}"
    code_id = new_id("code")
    now = time.time()
    conn.execute(
        "INSERT INTO approval_codes(id, purpose, investigation_id, target, digest, created_at, expires_at) "
        "VALUES(?,?,?,?,?,?,?)",
        (code_id, purpose, investigation_id, target, _digest(code, code_id), now, now + CODE_TTL_S),
    )
    return code


def redeem(
    conn: sqlite3.Connection, purpose: str, investigation_id: str, target: str, code: str
) -> str | None:
    """None when `code` is the live code for this decision (it is used up); else why it is refused."""
    row = conn.execute(
        "SELECT * FROM approval_codes WHERE purpose=? AND investigation_id=? AND target=? AND used_at IS NULL "
        "ORDER BY created_at DESC LIMIT 1",
        (purpose, investigation_id, target),
    ).fetchone()
    if row is None:
        return "no approval code is pending for this decision (none was issued, or it was used or withdrawn)"
    now = time.time()
    if now > row["expires_at"]:
        conn.execute("UPDATE approval_codes SET used_at = -1 WHERE id = ?", (row["id"],))
        return "the approval code has expired (codes live 15 minutes)"
    if not secrets.compare_digest(_digest(code, row["id"]), row["digest"]):
        tries = int(row["tries"]) + 1
        burned = tries >= MAX_TRIES
        conn.execute(
            "UPDATE approval_codes SET tries = ?, used_at = ? WHERE id = ?",
            (tries, -1 if burned else None, row["id"]),
        )
        return "the approval code is wrong" + (" (5 wrong tries: it is withdrawn)" if burned else "")
    conn.execute("UPDATE approval_codes SET used_at = ? WHERE id = ?", (now, row["id"]))
    return None


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

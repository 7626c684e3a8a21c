"""A seal over the protocol's tables: state the server did not write is detected.

Every protocol write transaction ends by storing an HMAC-SHA256 of every row of the protocol's
tables (`seal` table), keyed with a secret kept in the per-user state folder (`STATE_ROOT/key`, mode
0600), never in the workspace. Every read (the server's and the edit gate's) recomputes it first: a
row edited, added or deleted with sqlite3, a database replaced by another, or a key replaced, no
longer matches, and the state is treated as altered (the gate closes and says so).

What it does not stop: a process running as the same OS user can read the key and re-seal, or put
back an older copy of the whole state folder. The README's "What the server guarantees" says so.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
from pathlib import Path

from trainsleuth.state.location import ensure_private_dir, state_root

KEY_NAME = "key"
# Every table whose rows decide what the protocol allows. Empty tables add nothing, so a migration that
# adds a table does not change the seal.
SEALED_TABLES = (
    "investigations",
    "evidence",
    "events",
    "hypotheses",
    "diagnoses",
    "reviews",
    "fix_attempts",
    "problems",
    "settings",
    "person_requests",
    "counters",
)


class SealError(Exception):
    """The seal cannot be checked or does not match; the message says what is wrong."""


def key_path() -> Path:
    return state_root() / KEY_NAME


def load_key(create: bool) -> bytes | None:
    """The signing key; created (0600) on first use when `create`, else None when it is missing."""
    path = key_path()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if not create:
            return None
        ensure_private_dir(path.parent)
        key = secrets.token_bytes(32)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process created it first
            return path.read_bytes()
        with os.fdopen(fd, "wb") as fh:
            fh.write(key)
        return key
    if len(data) < 32:
        raise SealError(f"the signing key {path} is truncated ({len(data)} bytes)")
    return data


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def compute(conn: sqlite3.Connection, key: bytes) -> str:
    """HMAC over every row of the sealed tables, in a canonical order."""
    mac = hmac.new(key, b"trainsleuth-seal-v1", hashlib.sha256)
    present = _tables(conn)
    for table in SEALED_TABLES:
        if table not in present:
            continue
        cur = conn.execute(f"SELECT * FROM {table} ORDER BY rowid")
        names = [d[0] for d in cur.description]
        for row in cur:
            record = json.dumps(
                [table, dict(zip(names, tuple(row), strict=True))], sort_keys=True, default=str
            )
            mac.update(record.encode("utf-8", "surrogateescape"))
            mac.update(b"\n")
    return mac.hexdigest()


def write(conn: sqlite3.Connection, key: bytes) -> None:
    digest = compute(conn, key)
    conn.execute(
        "INSERT INTO seal(id, digest) VALUES(1, ?) ON CONFLICT(id) DO UPDATE SET digest = excluded.digest",
        (digest,),
    )


def problem(conn: sqlite3.Connection, key: bytes | None) -> str | None:
    """None when the seal matches; else what is wrong, in words."""
    if key is None:
        return f"the signing key {key_path()} is missing (it was removed or the state root changed)"
    if "seal" not in _tables(conn):
        return "the state database has no seal table (it was replaced or rebuilt)"
    row = conn.execute("SELECT digest FROM seal WHERE id = 1").fetchone()
    if row is None:
        return "the state database has no seal (it was replaced, or its seal was deleted)"
    if not hmac.compare_digest(str(row[0]), compute(conn, key)):
        return (
            "the state database's rows do not match its seal (edited, added or deleted outside trainsleuth)"
        )
    return None


__all__ = ["SEALED_TABLES", "SealError", "compute", "key_path", "load_key", "problem", "write"]

"""SQLite state (WAL mode, versioned schemas, safe across processes), kept outside the workspace.

`default_state_path(workspace)` is the authoritative place (`state/location.py`): a per-user state
folder keyed by the workspace's real path, so the assistant working inside the workspace cannot edit,
delete or shadow it by accident or by a stray command.

Each component (protocol, jobs, literature cache, ...) owns its tables and its own list of
migrations, applied in order and recorded in `schema_versions`, so components evolve
independently. Every connection is short-lived and sets a busy timeout; writes use
`BEGIN IMMEDIATE`, which serialises writers across threads and processes without
surprising "database is locked" errors.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from trainsleuth.state.location import (
    DB_NAME,
    GITIGNORE,
    WORKSPACE_DIR,
    authoritative_db,
    ensure_private_dir,
)

Migration = Callable[[sqlite3.Connection], None] | str

STATE_DIR_NAME = WORKSPACE_DIR
BUSY_TIMEOUT_MS = 30_000


class StoreError(Exception):
    """The state database cannot be opened or migrated; the message says where and why."""


def default_state_path(workspace: Path) -> Path:
    """The authoritative state database of a workspace (outside it; see state/location.py)."""
    return authoritative_db(workspace)


def ensure_state_dir(directory: Path) -> None:
    """Create the state folder: private to the user, or with a .gitignore inside a `.trainsleuth/` folder."""
    if directory.name == STATE_DIR_NAME:
        directory.mkdir(parents=True, exist_ok=True)
        gitignore = directory / ".gitignore"
        if not gitignore.exists():
            gitignore.write_text(GITIGNORE, encoding="utf-8")
    else:
        ensure_private_dir(directory)


class Store:
    """A handle on one state database. Cheap to create; connections are opened per use."""

    def __init__(self, path: Path, workspace: Path | None = None) -> None:
        self.path = Path(path)
        # The workspace this state governs, when known (the protocol writes its marker there).
        self.workspace = Path(workspace) if workspace is not None else None
        self._migrated: set[str] = set()
        self._lock = threading.Lock()
        try:
            ensure_state_dir(self.path.parent)
        except OSError as exc:
            raise StoreError(f"cannot create the state folder {self.path.parent}: {exc}") from exc
        with self.connect() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_versions (component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
            )

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the state database {self.path}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A connection in autocommit mode, for reads and single statements."""
        conn = self._open()
        try:
            yield conn
        finally:
            conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (`BEGIN IMMEDIATE`): committed on success, rolled back on error."""
        conn = self._open()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    def migrate(self, component: str, migrations: Sequence[Migration]) -> int:
        """Apply the component's pending migrations; return its schema version.

        Migration i (1-based) runs once, inside the same transaction that records version i,
        so concurrent processes never apply one twice.
        """
        if component in self._migrated:
            return len(migrations)
        with self._lock:
            with self.transaction() as conn:
                row = conn.execute(
                    "SELECT version FROM schema_versions WHERE component = ?", (component,)
                ).fetchone()
                current = int(row["version"]) if row else 0
                if current > len(migrations):
                    raise StoreError(
                        f"{self.path} holds schema version {current} of {component!r}, newer than this "
                        f"trainsleuth knows ({len(migrations)}); upgrade trainsleuth"
                    )
                for version in range(current + 1, len(migrations) + 1):
                    step = migrations[version - 1]
                    if isinstance(step, str):
                        for statement in _split_sql(step):
                            conn.execute(statement)
                    else:
                        step(conn)
                    conn.execute(
                        "INSERT INTO schema_versions(component, version) VALUES(?, ?) "
                        "ON CONFLICT(component) DO UPDATE SET version = excluded.version",
                        (component, version),
                    )
            self._migrated.add(component)
        return len(migrations)

    def schema_version(self, component: str) -> int:
        with self.connect() as conn:
            row = conn.execute(
                "SELECT version FROM schema_versions WHERE component = ?", (component,)
            ).fetchone()
        return int(row["version"]) if row else 0


def _split_sql(script: str) -> list[str]:
    """Split a migration script into statements (sqlite3.execute runs one at a time)."""
    statements: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                statements.append(buf.strip())
            buf = ""
    if buf.strip():
        statements.append(buf.strip())
    return statements


__all__ = [
    "BUSY_TIMEOUT_MS",
    "DB_NAME",
    "STATE_DIR_NAME",
    "Migration",
    "Store",
    "StoreError",
    "default_state_path",
    "ensure_state_dir",
]

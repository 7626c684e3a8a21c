"""The state store: WAL, per-component migrations, git-ignored, safe across processes."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from trainsleuth.state.store import Store, StoreError, default_state_path

MIGRATIONS = [
    "CREATE TABLE items (id INTEGER PRIMARY KEY AUTOINCREMENT, writer TEXT NOT NULL, n INTEGER NOT NULL);",
    "ALTER TABLE items ADD COLUMN note TEXT;",
]


def test_state_lives_outside_the_workspace_private_and_wal(
    workspace: Path, _private_state_root: Path
) -> None:
    store = Store(default_state_path(workspace))
    assert _private_state_root in store.path.parents and workspace not in store.path.parents
    assert store.path.parent.stat().st_mode & 0o077 == 0  # only this user can read the folder
    assert not (workspace / ".trainsleuth").exists()  # nothing is written into the workspace
    with store.connect() as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # The same workspace reached through a symlink has the same state.
    link = workspace.parent / "link"
    link.symlink_to(workspace)
    assert default_state_path(link) == store.path


def test_a_state_folder_inside_the_workspace_is_git_ignored(workspace: Path) -> None:
    Store(workspace / ".trainsleuth" / "state.db")  # an explicit --state inside the workspace
    assert (workspace / ".trainsleuth" / ".gitignore").read_text().strip().endswith("*")
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    out = subprocess.run(
        ["git", "-C", str(workspace), "status", "--porcelain", "--untracked-files=all"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert ".trainsleuth" not in out


def test_migrations_apply_once_and_in_order(workspace: Path) -> None:
    path = default_state_path(workspace)
    assert Store(path).migrate("demo", MIGRATIONS[:1]) == 1
    store = Store(path)
    assert store.schema_version("demo") == 1
    store.migrate("demo", MIGRATIONS)
    assert store.schema_version("demo") == 2
    with store.transaction() as conn:
        conn.execute("INSERT INTO items(writer, n, note) VALUES('a', 1, 'x')")
    # re-running from a fresh handle is a no-op
    Store(path).migrate("demo", MIGRATIONS)
    with store.connect() as conn:
        assert conn.execute("SELECT count(*) FROM items").fetchone()[0] == 1


def test_newer_schema_is_refused(workspace: Path) -> None:
    path = default_state_path(workspace)
    Store(path).migrate("demo", MIGRATIONS)
    with pytest.raises(StoreError, match="newer than this trainsleuth knows"):
        Store(path).migrate("demo", MIGRATIONS[:1])


def test_failed_transaction_rolls_back(workspace: Path) -> None:
    store = Store(default_state_path(workspace))
    store.migrate("demo", MIGRATIONS)
    with pytest.raises(sqlite3.IntegrityError), store.transaction() as conn:
        conn.execute("INSERT INTO items(writer, n) VALUES('a', 1)")
        conn.execute("INSERT INTO items(writer, n) VALUES(NULL, 2)")
    with store.connect() as conn:
        assert conn.execute("SELECT count(*) FROM items").fetchone()[0] == 0


WRITER = """
import sys
from pathlib import Path
from trainsleuth.state.store import Store
MIGRATIONS = {migrations!r}
store = Store(Path(sys.argv[1]))
store.migrate("demo", MIGRATIONS)
for n in range(int(sys.argv[3])):
    with store.transaction() as conn:
        cur = conn.execute("SELECT count(*) FROM items WHERE writer = ?", (sys.argv[2],)).fetchone()[0]
        conn.execute("INSERT INTO items(writer, n) VALUES(?, ?)", (sys.argv[2], cur))
"""


def test_concurrent_writers_across_processes(workspace: Path) -> None:
    path = default_state_path(workspace)
    script = WRITER.format(migrations=MIGRATIONS)
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(path), f"w{i}", "60"], stderr=subprocess.PIPE)
        for i in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    store = Store(path)
    with store.connect() as conn:
        rows = conn.execute("SELECT writer, n FROM items ORDER BY writer, n").fetchall()
    assert len(rows) == 240
    for i in range(4):
        # each writer's read-then-write ran atomically: its counters are exactly 0..59
        assert [r["n"] for r in rows if r["writer"] == f"w{i}"] == list(range(60))
    assert store.schema_version("demo") == 2

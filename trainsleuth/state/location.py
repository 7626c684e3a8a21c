"""Where a workspace's authoritative state lives: outside the workspace, keyed by its real path.

The assistant works *inside* the workspace, so nothing it must not forge is kept there. The state
database is `STATE_ROOT/workspaces/<hash of the workspace's real path>/state.db`, where STATE_ROOT is
`$TRAINSLEUTH_STATE_DIR` (tests), else `$XDG_STATE_HOME/trainsleuth`, else `~/.local/state/trainsleuth`
(`%LOCALAPPDATA%/trainsleuth/state` on Windows). The workspace keeps only `.trainsleuth/` (git-ignored)
with the assistant's scratch folder, RCA documents and a marker, `.trainsleuth/state.json`, saying that
protocol state exists for it: a marker without its state means the state was removed.

An older trainsleuth kept the database in `WORKSPACE/.trainsleuth/state.db`; `migrate_legacy` copies it
to the new place once (nothing is lost) and renames the old file so it is never read again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

STATE_ENV = "TRAINSLEUTH_STATE_DIR"
WORKSPACE_DIR = ".trainsleuth"
DB_NAME = "state.db"
MARKER_NAME = "state.json"
GITIGNORE = "# Written by trainsleuth: local investigation files, never committed.\n*\n"


def state_root() -> Path:
    """The per-user folder holding every workspace's state and the signing key."""
    override = os.environ.get(STATE_ENV)
    if override:
        return Path(override).expanduser().absolute()
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "trainsleuth" / "state"
    xdg = os.environ.get("XDG_STATE_HOME")
    base_path = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "state"
    return base_path / "trainsleuth"


def real_workspace(workspace: Path) -> Path:
    return Path(os.path.realpath(workspace))


def workspace_key(workspace: Path) -> str:
    return hashlib.sha256(str(real_workspace(workspace)).encode("utf-8", "surrogateescape")).hexdigest()[:24]


def workspace_state_dir(workspace: Path) -> Path:
    return state_root() / "workspaces" / workspace_key(workspace)


def authoritative_db(workspace: Path) -> Path:
    return workspace_state_dir(workspace) / DB_NAME


def workspace_dir(workspace: Path) -> Path:
    """`WORKSPACE/.trainsleuth/`: scratch, RCA documents and the marker (git-ignored)."""
    return Path(workspace) / WORKSPACE_DIR


def marker_path(workspace: Path) -> Path:
    return workspace_dir(workspace) / MARKER_NAME


def legacy_db(workspace: Path) -> Path:
    return workspace_dir(workspace) / DB_NAME


def ensure_workspace_dir(workspace: Path) -> Path:
    """Create `.trainsleuth/` with its .gitignore (and scratch/), so git never sees what is inside."""
    folder = workspace_dir(workspace)
    folder.mkdir(parents=True, exist_ok=True)
    gitignore = folder / ".gitignore"
    if not gitignore.exists():
        gitignore.write_text(GITIGNORE, encoding="utf-8")
    (folder / "scratch").mkdir(exist_ok=True)
    return folder


def ensure_private_dir(path: Path) -> None:
    """A folder only this user can read (the state and the key live there)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        os.chmod(path, 0o700)
    except OSError:
        pass


def write_marker(workspace: Path, db: Path) -> None:
    """Record in the workspace that protocol state exists for it, and where."""
    ensure_workspace_dir(workspace)
    data = {
        "workspace": str(real_workspace(workspace)),
        "state": str(db),
        "note": "trainsleuth keeps this workspace's investigation state outside it, at 'state'. Removing "
        "that state, or this file, does not reopen the edit gate.",
    }
    path = marker_path(workspace)
    try:
        if path.is_file() and json.loads(path.read_text(encoding="utf-8")) == data:
            return
    except (OSError, ValueError):
        pass
    tmp = path.with_name(f".{MARKER_NAME}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_marker(workspace: Path) -> dict[str, Any] | None:
    """The marker's content; {} when it exists but cannot be read; None when there is none."""
    path = marker_path(workspace)
    if not path.exists() and not path.is_symlink():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def governs(folder: Path) -> bool:
    """Whether trainsleuth protocol state exists (or existed) for this folder: its marker, its
    authoritative state, or a legacy in-workspace database."""
    return marker_path(folder).exists() or authoritative_db(folder).exists() or legacy_db(folder).is_file()


def governing_workspace(start: Path) -> Path | None:
    """The nearest folder at or above `start` that trainsleuth state governs."""
    start = Path(os.path.abspath(start))
    for folder in (start, *start.parents):
        if governs(folder):
            return folder
    return None


def migrate_legacy(workspace: Path, db: Path) -> Path | None:
    """Copy `WORKSPACE/.trainsleuth/state.db` to the authoritative place once; return the renamed old file.

    Only when the new database does not exist yet, so a file planted later is never imported. The
    copy uses SQLite's backup API (consistent even while another process writes)."""
    old = legacy_db(workspace)
    if db.exists() or not old.is_file() or old.is_symlink():
        return None
    ensure_private_dir(db.parent)
    tmp = db.with_name(f".{db.name}.{os.getpid()}.migrating")
    src = sqlite3.connect(old, timeout=30)
    try:
        src.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        dst = sqlite3.connect(tmp)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()
    os.replace(tmp, db)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    moved = old.with_name(f"{DB_NAME}.migrated-{stamp}")
    os.replace(old, moved)
    return moved


__all__ = [
    "DB_NAME",
    "MARKER_NAME",
    "STATE_ENV",
    "WORKSPACE_DIR",
    "authoritative_db",
    "ensure_private_dir",
    "ensure_workspace_dir",
    "governing_workspace",
    "governs",
    "legacy_db",
    "marker_path",
    "migrate_legacy",
    "read_marker",
    "real_workspace",
    "state_root",
    "workspace_dir",
    "workspace_key",
    "workspace_state_dir",
    "write_marker",
]

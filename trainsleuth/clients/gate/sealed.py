"""The sealed state folder: the per-user place outside the workspace where the protocol keeps its
database and signing key (`state/location.py`). Only the trainsleuth server writes there, so the
gate denies every write it can see reaching it, whatever the phase: an Edit/Write path, a redirection,
cp/mv/rm/sqlite3 operands (literal, through `~`, a symlink or a glob that matches it), and a command
whose writes the gate cannot place (`python -c`, a `$VARIABLE` path) that names the folder.

The folders: the root this process would use (TRAINSLEUTH_STATE_DIR, else XDG_STATE_HOME, else
~/.local/state), the default root without the override (a server started elsewhere may use it), the
folder of a `--state` database, and the one the workspace's marker (`.trainsleuth/state.json`) names.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable
from pathlib import Path

from trainsleuth.state.location import STATE_ENV, read_marker, state_root

# Words that point a command at the state folder without spelling its path.
_STATE_WORDS = (STATE_ENV, "XDG_STATE_HOME", ".local/state")


def _default_root() -> Path:
    """The root a server started without TRAINSLEUTH_STATE_DIR uses (as `state_root` finds it)."""
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "trainsleuth" / "state"
    xdg = os.environ.get("XDG_STATE_HOME")
    base_path = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "state"
    return base_path / "trainsleuth"


def state_folders(workspace: Path | None, state_path: Path | None = None) -> list[Path]:
    """Every sealed state folder that may hold this workspace's state (absolute, links resolved too)."""
    # ~/.local/state/trainsleuth as well: a server started by a client with another environment uses it.
    found: list[Path] = [state_root(), _default_root(), Path.home() / ".local" / "state" / "trainsleuth"]
    if state_path is not None:
        found.append(Path(state_path).absolute().parent)
    if workspace is not None:
        marker = read_marker(workspace) or {}
        named = marker.get("state")
        if isinstance(named, str) and named:
            db = Path(named)
            # ROOT/workspaces/KEY/state.db: the whole root holds the key and every workspace's state.
            found.append(
                db.parents[2] if len(db.parents) > 2 and db.parent.parent.name == "workspaces" else db.parent
            )
    out: list[Path] = []
    for folder in found:
        for form in (Path(os.path.normpath(folder)), Path(os.path.realpath(folder))):
            if form not in out:
                out.append(form)
    return out


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _pattern_reaches(pattern: Path, folder: Path) -> bool:
    """Whether a glob could match the folder, something in it, or a folder above it."""
    p, f = pattern.parts, folder.parts
    n = min(len(p), len(f))
    return n > 1 and all(fnmatch.fnmatchcase(f[i], p[i]) for i in range(n))


def _guarded_ancestor(path: Path, folder: Path, keep: Iterable[Path]) -> bool:
    """Removing or replacing a folder above the state (`rm -rf ~/.local/state`) destroys it too; the home
    folder, the root and folders holding the workspace stay out of this (`cp x ~` is not an attack)."""
    if path not in folder.parents or path == Path(path.anchor) or path in Path.home().parents:
        return False
    if path == Path.home():
        return False
    return not any(_within(k, path) for k in keep)


def reaches_state(
    path: Path, folders: list[Path], *, pattern: bool = False, keep: Iterable[Path] = ()
) -> bool:
    """Whether a write to `path` (absolute) lands in, or removes, a sealed state folder."""
    keep = list(keep)
    forms = [path]
    if not pattern:
        real = Path(os.path.realpath(path))
        if real != path:
            forms.append(real)
    for folder in folders:
        for form in forms:
            if pattern:
                if _pattern_reaches(form, folder):
                    return True
            elif _within(form, folder) or _guarded_ancestor(form, folder, keep):
                return True
    return False


def _spelled(text: str, command: str) -> bool:
    """`text` (a folder path) appears in `command` as a whole path or the start of one, not as the
    prefix of another name (`/x/state` is not in `/x/state-ws/train.py`)."""
    return re.search(r"(?<![\w.-])" + re.escape(text) + r"(?![\w.-])", command) is not None


def names_state(command: str, folders: list[Path]) -> bool:
    """Whether a command's text spells a sealed state folder's path (absolute or ~-form)."""
    home = str(Path.home())
    for folder in folders:
        text = str(folder)
        if _spelled(text, command):
            return True
        if text.startswith(home + os.sep) and _spelled("~" + text[len(home) :], command):
            return True
    return False


def hints_state(command: str) -> bool:
    """Whether a command's text points at the state through a variable or a partial path."""
    return any(word in command for word in _STATE_WORDS)


__all__ = ["hints_state", "names_state", "reaches_state", "state_folders"]

"""Which Python runs the user's model: theirs, never the server's process."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


class InterpreterError(Exception):
    """The target interpreter cannot be used; the message says which one and why."""


def default_interpreter(workspace: Path) -> Path:
    """The project's `.venv` if present, else the interpreter running trainsleuth."""
    for candidate in (workspace / ".venv" / "bin" / "python", workspace / ".venv" / "Scripts" / "python.exe"):
        if candidate.exists():
            return candidate
    return Path(sys.executable)


def resolve_interpreter(python: str | None, workspace: Path) -> Path:
    """Resolve `python` (a path, or a name on PATH) or fall back to `default_interpreter`."""
    if not python:
        return default_interpreter(workspace)
    candidate = Path(python).expanduser()
    if not candidate.is_absolute() and os.sep not in python:
        found = shutil.which(python)
        if found is None:
            raise InterpreterError(f"interpreter {python!r} was not found on PATH")
        candidate = Path(found)
    elif not candidate.is_absolute():
        candidate = workspace / candidate
    if not candidate.exists():
        raise InterpreterError(f"interpreter {str(candidate)!r} does not exist")
    if not os.access(candidate, os.X_OK):
        raise InterpreterError(f"interpreter {str(candidate)!r} is not executable")
    return candidate

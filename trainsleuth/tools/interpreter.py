"""Which Python runs the user's model: theirs, never the server's process."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path


class InterpreterError(Exception):
    """The target interpreter cannot be used; the message says which one and why."""


def _env_python(prefix: str | None) -> Path | None:
    """The interpreter of an environment prefix (a conda env or an activated venv), if it has one."""
    if not prefix:
        return None
    for candidate in (
        Path(prefix) / "bin" / "python",
        Path(prefix) / "python.exe",
        Path(prefix) / "Scripts" / "python.exe",
    ):
        if candidate.exists():
            return candidate
    return None


def workspace_venv(workspace: Path) -> Path | None:
    for candidate in (workspace / ".venv" / "bin" / "python", workspace / ".venv" / "Scripts" / "python.exe"):
        if candidate.exists():
            return candidate
    return None


def discovered_interpreters(workspace: Path, env: Mapping[str, str] | None = None) -> dict[str, Path]:
    """The user's own interpreters the server finds on its own, by where they come from.

    - `workspace .venv`: the project's virtual environment;
    - `active conda env` (CONDA_PREFIX) and `active virtualenv` (VIRTUAL_ENV): the environment the
      person activated before starting the client (the server inherits it);
    - `python on PATH`: what `python` (else `python3`) runs for the person;
    - `the server's own`: the interpreter running trainsleuth.
    """
    env = os.environ if env is None else env
    found: dict[str, Path] = {}
    venv = workspace_venv(workspace)
    if venv is not None:
        found["workspace .venv"] = venv
    for label, key in (("active conda env", "CONDA_PREFIX"), ("active virtualenv", "VIRTUAL_ENV")):
        python = _env_python(env.get(key))
        if python is not None:
            found[label] = python
    for name in ("python", "python3"):
        on_path = shutil.which(name, path=env.get("PATH"))
        if on_path:
            found["python on PATH"] = Path(on_path)
            break
    found["the server's own"] = Path(sys.executable)
    return found


def default_interpreter(workspace: Path, env: Mapping[str, str] | None = None) -> Path:
    """The project's `.venv` if present, else an activated conda env, else the interpreter running
    trainsleuth. (`python` on PATH is allowed but not the default: it may be a system Python without
    the project's packages, while the server's own environment was installed for this.)"""
    env = os.environ if env is None else env
    found = discovered_interpreters(workspace, env)
    if env.get("CONDA_DEFAULT_ENV", "base") == "base":
        found.pop(
            "active conda env", None
        )  # conda's base env is active by default: not a choice made for this
    for label in ("workspace .venv", "active conda env", "active virtualenv"):
        if label in found:
            return found[label]
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

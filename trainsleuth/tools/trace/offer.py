"""From a bisect's answer to the call that explains it: the trace_diff a bisect offers on the pair it found.

A bisect names the first bad commit (or version); trace_diff on the last good and the first bad one
names the first call in it that differs. The offer is the exact call to make (the bisect's command
is a test; when it does not train, give the training command instead).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainsleuth.tools.job_cleanup import _git


def commit_offer(repo: Path, first_bad: str, command: str) -> dict[str, Any] | None:
    """trace_diff on the first bad commit's first parent (good: git bisect proved it) and the commit."""
    proc = _git(str(repo), "rev-parse", "--verify", "--quiet", f"{first_bad}^1")
    if proc.returncode != 0 or not proc.stdout.strip():
        return None  # a root commit: nothing before it
    parent = proc.stdout.strip()
    return {
        "tool": "trace_diff",
        "arguments": {"command": command, "rev_a": parent[:12], "rev_b": first_bad[:12], "cwd": str(repo)},
        "why": f"names the first call or tensor that differs between {parent[:12]} (good) and {first_bad[:12]} "
        "(first bad), with its call site; use your training command if the bisect's command does not train",
    }


def version_offer(
    package: str, good: str, bad: str, python_good: Path, python_bad: Path, command: str, cwd: Path
) -> dict[str, Any]:
    """trace_diff with the two environments the bisect built (last good and first bad version)."""
    return {
        "tool": "trace_diff",
        "arguments": {
            "command": command,
            "python": str(python_good),
            "python_b": str(python_bad),
            "cwd": str(cwd),
        },
        "why": f"names the first call or tensor that differs between {package}=={good} and {package}=={bad} "
        "(the environments this bisect built), with its call site",
    }


def env_python(env_dir: Path) -> Path:
    return env_dir / ("Scripts/python.exe" if (env_dir / "Scripts").is_dir() else "bin/python")

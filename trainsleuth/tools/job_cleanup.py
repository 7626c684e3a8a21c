"""Cleaning up after a job: the git worktrees and folders it registered before creating them.

Used when a job ends (any way), when it is cancelled, and when a later process finds the job
left `running` by a process that died.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

log = logging.getLogger("trainsleuth.jobs")


def _git(repo: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", repo, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        check=False,
    )


def remove_worktree(repo: str, path: str, admin_dir: str | None = None) -> None:
    """Remove a worktree that trainsleuth created: its folder and git's record of it.

    Touches nothing else in the user's repository (no `git worktree prune`, which would also
    drop the user's own stale worktrees).
    """
    wt = Path(path)
    if admin_dir is None and (wt / ".git").is_file():
        text = (wt / ".git").read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            admin_dir = text.split(":", 1)[1].strip()
    if admin_dir is None and not wt.exists():
        admin_dir = _find_admin_dir(repo, wt)
    if wt.exists():
        try:
            _git(repo, "worktree", "remove", "--force", "--force", str(wt))
        except (OSError, subprocess.SubprocessError):
            log.debug("git worktree remove failed for %s", wt, exc_info=True)
    if wt.exists():
        shutil.rmtree(wt, ignore_errors=True)
    if admin_dir:
        admin = Path(admin_dir)
        # Only ever delete a `<gitdir>/worktrees/<name>` folder.
        if admin.is_dir() and admin.parent.name == "worktrees":
            shutil.rmtree(admin, ignore_errors=True)
            try:
                admin.parent.rmdir()  # git deletes `worktrees/` when the last one goes; so do we
            except OSError:
                pass


def _find_admin_dir(repo: str, wt: Path) -> str | None:
    """git's record (`<gitdir>/worktrees/<name>`) of the worktree at `wt`, found by its gitdir file."""
    try:
        proc = _git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    worktrees = Path(proc.stdout.strip()) / "worktrees"
    if not worktrees.is_dir():
        return None
    for admin in worktrees.iterdir():
        gitdir = admin / "gitdir"
        try:
            target = Path(gitdir.read_text(encoding="utf-8").strip())
        except OSError:
            continue
        if target.parent == wt:
            return str(admin)
    return None


def run_cleanup(entries: list[dict[str, str]]) -> list[str]:
    """Remove every registered worktree and folder; return what could not be removed."""
    problems: list[str] = []
    # Worktrees first: removing their parent folder first would leave git's records behind.
    entries = sorted(entries, key=lambda e: 0 if e.get("kind") == "worktree" else 1)
    for entry in entries:
        kind = entry.get("kind")
        try:
            if kind == "worktree":
                remove_worktree(entry["repo"], entry["path"], entry.get("admin_dir"))
            elif kind == "dir":
                shutil.rmtree(entry["path"], ignore_errors=True)
            path = entry.get("path")
            if path and Path(path).exists():
                problems.append(path)
        except Exception as exc:  # cleanup is best effort, but say what was left
            problems.append(f"{entry.get('path')}: {exc}")
    return problems

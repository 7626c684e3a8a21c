"""A scratch copy of the workspace for an observed run, and a check that the user's folders were left as found.

The user's command runs in `RUN/tree/<workspace name>/`: the project's source files (tracked, and
untracked but not ignored) are copied; ignored entries (data sets, checkpoints, the virtual
environment, `.git`) and the workspace's neighbours (`../data`) are symbolic links to the originals,
so the run reads what it always reads. The observer's guard (`runners/_ts_observe_guard.py`) turns
every Python write through a link into a write in the copy. The workspace is fingerprinted before and
after (sizes and modification times), so a write that escaped anyway (native code) is named.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

COPY_LIMIT_BYTES = 512 * 1024 * 1024  # past this, large files are linked instead of copied
LARGE_FILE_BYTES = 8 * 1024 * 1024
MAX_FILES = 50_000
SNAPSHOT_LIMIT = 100_000
SKIP_ALWAYS = {".trainsleuth"}
SKIP_LINK = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
SKIP_SNAPSHOT = {".git", ".trainsleuth", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache"}
NEIGHBOURS_LIMIT = 200


@dataclass
class Mirror:
    """Where the run happens (`tree`) for a workspace (`workspace`), and what was linked rather than copied."""

    workspace: Path
    root: Path  # RUN/tree
    tree: Path  # RUN/tree/<workspace name>
    copied: int = 0
    linked: list[str] = field(default_factory=list)

    def to_mirror(self, path: Path) -> Path:
        """The place in the copy that stands for `path` in the workspace."""
        return self.tree / path.resolve().relative_to(self.workspace)


def _git_files(workspace: Path) -> tuple[list[str], list[str]] | None:
    """(source files, ignored entries) from git; None outside a git work tree."""
    try:
        top = subprocess.run(
            ["git", "-C", str(workspace), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != workspace:
            return None
        files = subprocess.run(
            ["git", "-C", str(workspace), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            timeout=60,
        )
        ignored = subprocess.run(
            [
                "git",
                "-C",
                str(workspace),
                "ls-files",
                "-z",
                "--others",
                "--ignored",
                "--exclude-standard",
                "--directory",
            ],
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if files.returncode != 0:
        return None
    sources = [f for f in files.stdout.decode("utf-8", "surrogateescape").split("\0") if f]
    ignored_paths = {
        f.rstrip("/")
        for f in ignored.stdout.decode("utf-8", "surrogateescape").split("\0")
        if f and ignored.returncode == 0 and Path(f.rstrip("/")).name not in SKIP_LINK
    }
    return sources, sorted(ignored_paths | {".git"})


def _walk_files(workspace: Path) -> tuple[list[str], list[str]]:
    """Without git: every file below the workspace, but folders that are environments or caches are linked."""
    sources: list[str] = []
    linked: list[str] = []
    for dirpath, dirnames, filenames in os.walk(workspace):
        rel_dir = os.path.relpath(dirpath, workspace)
        keep = []
        for d in dirnames:
            if d in SKIP_SNAPSHOT or (Path(dirpath, d) / "pyvenv.cfg").exists():
                if rel_dir == "." and d not in SKIP_ALWAYS:
                    linked.append(d)
                continue
            keep.append(d)
        dirnames[:] = keep
        for f in filenames:
            sources.append(f if rel_dir == "." else f"{rel_dir}/{f}")
            if len(sources) > MAX_FILES:
                return [], sorted(p.name for p in workspace.iterdir() if p.name not in SKIP_ALWAYS)
    return sources, linked


def make_mirror(workspace: Path, run_dir: Path, source: Path | None = None) -> Mirror:
    """Build RUN/tree/<name>/ for `workspace`: sources copied, everything else linked.

    `source` (a git worktree of another revision of the workspace's repository) supplies the source
    files instead of the workspace; the workspace's ignored entries (data, checkpoints, environments)
    are still linked, so the other revision reads the user's data."""
    workspace = workspace.resolve()
    root = run_dir / "tree"
    tree = root / workspace.name
    tree.mkdir(parents=True)
    mirror = Mirror(workspace=workspace, root=root, tree=tree)
    origin = source.resolve() if source is not None else workspace
    listed = _git_files(origin)
    sources, link_tops = listed if listed is not None else _walk_files(origin)
    if source is not None:
        own = _git_files(workspace)
        user_links = [rel for rel in (own[1] if own else []) if rel != ".git"]
        link_tops = sorted(set(user_links) - set(sources))
        git_link = tree / ".git"
        if os.path.lexists(origin / ".git") and not os.path.lexists(git_link):
            os.symlink(origin / ".git", git_link)
    total = 0
    for rel in sources:
        if rel.split("/")[0] in SKIP_ALWAYS:
            continue
        src = origin / rel
        dst = tree / rel
        try:
            st = src.lstat()
        except OSError:
            continue  # listed by git but deleted in the working tree
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
            continue
        if not src.is_file():
            continue
        total += st.st_size
        if st.st_size > LARGE_FILE_BYTES or total > COPY_LIMIT_BYTES:
            os.symlink(src, dst)
            mirror.linked.append(rel)
        else:
            shutil.copy2(src, dst)
            mirror.copied += 1
    for rel in link_tops:
        src = workspace / rel
        dst = tree / rel
        if rel.split("/")[0] in SKIP_ALWAYS or not os.path.lexists(src) or os.path.lexists(dst):
            continue
        if any(q.is_symlink() for q in [dst.parent, *dst.parent.parents] if tree in q.parents):
            continue  # inside a folder that is linked already
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(src, dst)
        mirror.linked.append(rel)
    _link_neighbours(workspace, root)
    return mirror


def _link_neighbours(workspace: Path, root: Path) -> None:
    """`../data` from the project reads the user's `../data`: link the workspace's siblings beside the copy."""
    parent = workspace.parent
    try:
        siblings = sorted(parent.iterdir())[:NEIGHBOURS_LIMIT]
    except OSError:
        return
    for sibling in siblings:
        if sibling.name == workspace.name:
            continue
        dst = root / sibling.name
        if not os.path.lexists(dst):
            try:
                os.symlink(sibling, dst)
            except OSError:
                continue


def snapshot(workspace: Path) -> dict[str, tuple[int, int]]:
    """Size and modification time of every file in the workspace (environments and caches left out)."""
    out: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(workspace):
        dirnames[:] = [
            d for d in dirnames if d not in SKIP_SNAPSHOT and not (Path(dirpath, d) / "pyvenv.cfg").exists()
        ]
        for f in filenames:
            path = os.path.join(dirpath, f)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            out[os.path.relpath(path, workspace)] = (st.st_size, st.st_mtime_ns)
            if len(out) >= SNAPSHOT_LIMIT:
                return out
        for d in dirnames:
            out.setdefault(os.path.relpath(os.path.join(dirpath, d), workspace) + "/", (0, 0))
    return out


def changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """What differs between two snapshots: `+path` created, `-path` removed, `~path` modified."""
    out = [f"+{p}" for p in sorted(after.keys() - before.keys())]
    out += [f"-{p}" for p in sorted(before.keys() - after.keys())]
    out += [
        f"~{p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p] and not p.endswith("/")
    ]
    return out


def remove_old_runs(runs_dir: Path, keep: int) -> None:
    """Keep the newest `keep` run folders (the user may look at what the last runs wrote)."""
    try:
        runs = sorted((p for p in runs_dir.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    except OSError:
        return
    for old in runs[:-keep] if keep > 0 else runs:
        shutil.rmtree(old, ignore_errors=True)

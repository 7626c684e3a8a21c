"""Snapshots of a git working tree that never touch the user's files, index or branches.

`take_snapshot` writes the working tree as it is right now (HEAD plus every uncommitted change:
modified, deleted, and untracked-but-not-ignored files) into a git tree object using a
*temporary* index file in the state folder (outside the repository; left-overs of a killed server
are swept on the next snapshot), then wraps it in a commit kept alive by a ref under
`refs/trainsleuth/`. The user's index, working tree, HEAD, branches and stash are never modified.
The refs live only as long as they are needed: `delete_refs` removes an attempt's or an
investigation's refs when it is verified or closed, and `list_refs` shows what is left.

`diff_snapshots` compares two snapshots; `restore_files` puts back, from the earlier snapshot,
only the files that changed between two snapshots, and only where the file on disk still holds
the later snapshot's content (so nothing written afterwards is ever overwritten).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

GIT_TIMEOUT_S = 120
# Untracked files larger than this are left out of snapshots (datasets, checkpoints) and reported.
MAX_UNTRACKED_BYTES = 20 * 1024 * 1024

_IDENTITY = {
    "GIT_AUTHOR_NAME": "trainsleuth",
    "GIT_AUTHOR_EMAIL": "trainsleuth@localhost",
    "GIT_COMMITTER_NAME": "trainsleuth",
    "GIT_COMMITTER_EMAIL": "trainsleuth@localhost",
}


class SnapshotError(Exception):
    """The workspace cannot be snapshotted (not a git repository, git missing, git failed)."""


@dataclass
class Snapshot:
    repo_root: str
    prefix: str  # the workspace's path inside the repository ("" at the root), with a trailing "/"
    head: str | None  # None on a repository without commits
    commit: str  # a commit whose tree is the working tree at snapshot time
    tree: str
    ref: str
    dirty: bool  # uncommitted changes existed at snapshot time
    skipped_large: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "repo_root": self.repo_root,
            "prefix": self.prefix,
            "head": self.head,
            "commit": self.commit,
            "tree": self.tree,
            "ref": self.ref,
            "dirty": self.dirty,
            "skipped_large": self.skipped_large,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Snapshot:
        return cls(
            repo_root=str(data["repo_root"]),
            prefix=str(data.get("prefix") or ""),
            head=str(data["head"]) if data.get("head") else None,
            commit=str(data["commit"]),
            tree=str(data["tree"]),
            ref=str(data["ref"]),
            dirty=bool(data.get("dirty")),
            skipped_large=[str(p) for p in data.get("skipped_large") or []],  # type: ignore[attr-defined]
        )


@dataclass
class Change:
    status: str  # A (added), M (modified), D (deleted), T (type change)
    path: str  # relative to the repository root
    old_blob: str | None
    old_mode: str | None
    new_blob: str | None
    new_mode: str | None


def _git(
    cwd: Path,
    *args: str,
    env: dict[str, str] | None = None,
    input_bytes: bytes | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    full_env = {**os.environ, **(env or {})}
    # Never let a user's hooks, pager or editor run from our plumbing calls.
    full_env["GIT_TERMINAL_PROMPT"] = "0"
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=str(cwd),
            env=full_env,
            input=input_bytes,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError as exc:
        raise SnapshotError("git is not installed or not on PATH") from exc
    except subprocess.TimeoutExpired as exc:
        raise SnapshotError(f"git {' '.join(args[:2])} took longer than {GIT_TIMEOUT_S}s") from exc
    if check and proc.returncode != 0:
        raise SnapshotError(
            f"git {' '.join(args[:3])} failed: {proc.stderr.decode('utf-8', 'replace').strip()[:500]}"
        )
    return proc


def repo_root(workspace: Path) -> Path:
    proc = _git(workspace, "rev-parse", "--show-toplevel", check=False)
    if proc.returncode != 0:
        raise SnapshotError(f"{workspace} is not inside a git repository")
    return Path(proc.stdout.decode().strip())


STALE_TMP_S = 3600


def _temp_dir(state_dir: Path) -> Path:
    """A fresh folder for a temporary index, under the state folder; sweeps ones a killed process left."""
    base = state_dir / "tmp"
    base.mkdir(parents=True, exist_ok=True)
    now = time.time()
    for old in base.glob("snapshot-*"):
        try:
            if now - old.stat().st_mtime > STALE_TMP_S:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
    return Path(tempfile.mkdtemp(prefix="snapshot-", dir=base))


@dataclass
class WorkTree:
    root: Path
    prefix: str
    head: str | None
    tree: str
    skipped_large: list[str]


def write_tree(workspace: Path, state_dir: Path) -> WorkTree:
    """The working tree of `workspace` (limited to the workspace folder) as a git tree object."""
    workspace = workspace.resolve()
    root = repo_root(workspace).resolve()
    rel = workspace.relative_to(root).as_posix() if workspace != root else ""
    prefix = f"{rel}/" if rel else ""
    head_proc = _git(root, "rev-parse", "--verify", "-q", "HEAD^{commit}", check=False)
    head = head_proc.stdout.decode().strip() if head_proc.returncode == 0 else None
    tmp_dir = _temp_dir(state_dir)
    index_path = tmp_dir / "index"
    try:
        state_rel = state_dir.resolve().relative_to(root).as_posix() + "/"
    except ValueError:
        state_rel = None
    env = {"GIT_INDEX_FILE": str(index_path)}
    skipped: list[str] = []
    try:
        if head:
            _git(root, "read-tree", head, env=env)
        else:
            _git(root, "read-tree", "--empty", env=env)
        pathspec = rel or "."
        # Tracked files: modifications and deletions (into the temporary index only).
        _git(root, "add", "-u", "--", pathspec, env=env)
        # Untracked files that are not ignored, except very large ones.
        others = _git(root, "ls-files", "-z", "--others", "--exclude-standard", "--", pathspec, env=env)
        add: list[str] = []
        for name in others.stdout.decode("utf-8", "surrogateescape").split("\0"):
            if not name or (state_rel and name.startswith(state_rel)) or "/.trainsleuth/" in f"/{name}":
                continue
            try:
                size = (root / name).stat().st_size
            except OSError:
                continue
            if size > MAX_UNTRACKED_BYTES:
                skipped.append(name)
            else:
                add.append(name)
        if add:
            payload = "\0".join(add).encode("utf-8", "surrogateescape") + b"\0"
            _git(root, "add", "--pathspec-from-file=-", "--pathspec-file-nul", env=env, input_bytes=payload)
        tree = _git(root, "write-tree", env=env).stdout.decode().strip()
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    return WorkTree(root, prefix, head, tree, skipped)


def commit_tree(root: Path, tree: str, head: str | None, ref: str, message: str) -> str:
    """Wrap a tree in a commit kept alive by `ref` (so git never prunes it while it is needed)."""
    args = ["commit-tree", tree, "-m", message]
    if head:
        args[2:2] = ["-p", head]
    commit = _git(root, *args, env=_IDENTITY).stdout.decode().strip()
    _git(root, "update-ref", ref, commit)
    return commit


def take_snapshot(workspace: Path, state_dir: Path, ref_name: str) -> Snapshot:
    """Record the working tree of `workspace` (limited to the workspace folder) as a commit."""
    wt = write_tree(workspace, state_dir)
    root = wt.root
    if wt.head:
        base_tree = _git(root, "rev-parse", f"{wt.head}^{{tree}}").stdout.decode().strip()
    else:
        base_tree = (
            _git(root, "hash-object", "-t", "tree", "--stdin", input_bytes=b"").stdout.decode().strip()
        )
    ref = f"{REF_PREFIX}{ref_name}"
    commit = commit_tree(root, wt.tree, wt.head, ref, f"trainsleuth snapshot {ref_name}")
    return Snapshot(
        repo_root=str(root),
        prefix=wt.prefix,
        head=wt.head,
        commit=commit,
        tree=wt.tree,
        ref=ref,
        dirty=wt.tree != base_tree,
        skipped_large=wt.skipped_large,
    )


REF_PREFIX = "refs/trainsleuth/"


def list_refs(workspace: Path, under: str = "") -> list[str]:
    """trainsleuth's refs in the workspace's repository (optionally only those under `under`)."""
    try:
        root = repo_root(workspace)
    except SnapshotError:
        return []
    proc = _git(root, "for-each-ref", "--format=%(refname)", REF_PREFIX + under, check=False)
    return [line for line in proc.stdout.decode().splitlines() if line.startswith(REF_PREFIX)]


def delete_refs(workspace: Path, under: str = "") -> list[str]:
    """Remove trainsleuth's refs (all of them, or those under `under`, e.g. an investigation id)."""
    refs = list_refs(workspace, under)
    if not refs:
        return []
    root = repo_root(workspace)
    payload = "".join(f"delete {ref}\n" for ref in refs).encode()
    _git(root, "update-ref", "--stdin", input_bytes=payload)
    return refs


def tree_changes(root: Path, before_tree: str, after_tree: str, prefix: str = "") -> list[str]:
    """Paths (relative to the repository root) that differ between two trees."""
    proc = _git(root, "diff-tree", "-r", "-z", "--no-renames", "--name-only", before_tree, after_tree)
    names = [n for n in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if n]
    return [n for n in names if not prefix or n.startswith(prefix)]


def object_exists(root: Path, obj: str) -> bool:
    return _git(root, "cat-file", "-e", obj, check=False).returncode == 0


def diff_changes(before: Snapshot, after: Snapshot) -> list[Change]:
    root = Path(after.repo_root)
    proc = _git(root, "diff-tree", "-r", "-z", "--no-renames", before.tree, after.tree)
    fields = proc.stdout.decode("utf-8", "surrogateescape").split("\0")
    changes: list[Change] = []
    i = 0
    while i + 1 < len(fields):
        meta, path = fields[i], fields[i + 1]
        i += 2
        if not meta.startswith(":"):
            continue
        old_mode, new_mode, old_blob, new_blob, status = meta[1:].split(" ")
        zero = "0" * len(old_blob)
        if before.prefix and not path.startswith(before.prefix):
            continue
        changes.append(
            Change(
                status=status[0],
                path=path,
                old_blob=None if old_blob == zero else old_blob,
                old_mode=None if old_mode == "000000" else old_mode,
                new_blob=None if new_blob == zero else new_blob,
                new_mode=None if new_mode == "000000" else new_mode,
            )
        )
    return changes


def diff_text(before: Snapshot, after: Snapshot, limit: int = 60_000) -> str:
    root = Path(after.repo_root)
    args = ["diff", "--no-color", "--no-ext-diff", "--no-renames", before.commit, after.commit]
    if before.prefix:
        args += ["--", before.prefix]
    text = _git(root, *args).stdout.decode("utf-8", "replace")
    if len(text) > limit:
        text = text[:limit] + f"\n… [diff truncated: {len(text) - limit} more characters]\n"
    return text


def _hash_file(root: Path, path: str) -> str | None:
    target = root / path
    if target.is_symlink():
        data = os.readlink(target).encode("utf-8", "surrogateescape")
        return _git(root, "hash-object", "--stdin", input_bytes=data).stdout.decode().strip()
    if not target.exists():
        return None
    return _git(root, "hash-object", "--", path).stdout.decode().strip()


@dataclass
class RestoreResult:
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # changed again since the later snapshot: left alone


def restore_files(before: Snapshot, after: Snapshot) -> RestoreResult:
    """Undo exactly the changes between two snapshots, file by file, touching nothing else.

    A file is restored only when its current content is still the `after` content; a file
    that changed again since is left alone and reported as skipped (its later edits are kept).
    """
    root = Path(after.repo_root)
    result = RestoreResult()
    for change in diff_changes(before, after):
        current = _hash_file(root, change.path)
        if current != change.new_blob:
            result.skipped.append(change.path)
            continue
        target = root / change.path
        if change.old_blob is None:
            target.unlink()
            result.removed.append(change.path)
            continue
        data = _git(root, "cat-file", "blob", change.old_blob).stdout
        if change.old_mode == "120000":
            if target.exists() or target.is_symlink():
                target.unlink()
            os.symlink(data.decode("utf-8", "surrogateescape"), target)
        else:
            if target.is_symlink():
                target.unlink()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            mode = 0o755 if change.old_mode == "100755" else 0o644
            os.chmod(target, mode)
        result.restored.append(change.path)
    return result

"""Generated git histories for the bisect tests, the benchmark and demos.

`make_history` writes hundreds of commits in one `git fast-import` run (a fraction of a second),
optionally with merged side branches, where the commit at `bug_at` (in creation order) adds a
file named `bug` that stays from then on: `test ! -f bug` is the reproducer.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

AUTHOR = "Ada Dev <ada@example.com>"


@dataclass
class History:
    path: Path
    commits: list[str]  # in creation order (oldest first)
    bug_commit: str

    @property
    def good(self) -> str:
        return self.commits[0]

    @property
    def bad(self) -> str:
        return self.commits[-1]


def _git(path: Path, *args: str, input_text: str | None = None) -> str:
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Ada Dev",
        "GIT_AUTHOR_EMAIL": "ada@example.com",
        "GIT_COMMITTER_NAME": "Ada Dev",
        "GIT_COMMITTER_EMAIL": "ada@example.com",
    }
    proc = subprocess.run(
        ["git", "-C", str(path), *args],
        input=input_text,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout


def _blob(text: str) -> str:
    data = text.encode()
    return f"data {len(data)}\n{text}\n"


def make_history(
    path: Path,
    n: int,
    bug_at: int,
    *,
    merge_every: int = 0,
    same_time: bool = False,
    extra_files: dict[int, dict[str, str]] | None = None,
) -> History:
    """Create a repository at `path` with `n` commits on main; commit number `bug_at` adds `bug`.

    With `merge_every=k`, every k-th commit is a merge of a two-commit side branch forked from
    the previous main commit. `extra_files` maps a commit number to files it writes.
    """
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.name", "Ada Dev")
    _git(path, "config", "user.email", "ada@example.com")
    _git(path, "config", "commit.gpgsign", "false")
    lines: list[str] = []
    mark = 0
    ts = 1_700_000_000
    has_bug = False
    main_marks: list[int] = []
    bug_mark = 0

    def commit(ref: str, msg: str, parent: int | None, merge: int | None, files: dict[str, str]) -> int:
        nonlocal mark, ts
        mark += 1
        if not same_time:
            ts += 60
        lines.append(f"commit {ref}")
        lines.append(f"mark :{mark}")
        lines.append(f"author {AUTHOR} {ts} +0000")
        lines.append(f"committer {AUTHOR} {ts} +0000")
        lines.append(_blob(msg).rstrip("\n"))
        if parent is not None:
            lines.append(f"from :{parent}")
        if merge is not None:
            lines.append(f"merge :{merge}")
        for name, text in files.items():
            if text is None:
                lines.append(f"D {name}")
            else:
                lines.append(f"M 100644 inline {name}")
                lines.append(_blob(text).rstrip("\n"))
        lines.append("")
        return mark

    for i in range(n):
        files = {"counter.txt": f"{i}\n"}
        if i == bug_at:
            files["bug"] = "introduced here\n"
            has_bug = True
        files.update((extra_files or {}).get(i, {}))
        parent = main_marks[-1] if main_marks else None
        merge = None
        if merge_every and i > 0 and i % merge_every == 0 and i != bug_at:
            side1 = commit("refs/heads/side", f"side work {i}a", parent, None, {f"side{i}.txt": "a\n"})
            side2 = commit("refs/heads/side", f"side work {i}b", side1, None, {f"side{i}.txt": "b\n"})
            merge = side2
        m = commit(
            "refs/heads/main",
            f"commit {i}" + (" (adds the bug)" if i == bug_at else ""),
            parent,
            merge,
            files,
        )
        main_marks.append(m)
        if i == bug_at:
            bug_mark = m
    lines.append("done")
    _git(path, "fast-import", "--quiet", "--done", input_text="\n".join(lines) + "\n")
    if merge_every:
        _git(path, "branch", "-D", "side")
    _git(path, "reset", "-q", "--hard", "main")
    marks_out = _git(path, "rev-list", "--first-parent", "--reverse", "main").split()
    assert has_bug and bug_mark
    return History(path=path, commits=marks_out, bug_commit=marks_out[bug_at])


def tree_digest(path: Path) -> dict[str, str]:
    """Every file and folder under `path` (.git included: index, HEAD, refs, stash) -> hash and mode.

    Two equal digests mean the checkout is byte-for-byte the same.
    """
    out: dict[str, str] = {}
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            p = Path(root) / name
            rel = str(p.relative_to(path))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() + f":{oct(p.stat().st_mode)}"
        for name in dirs:
            out[str((Path(root) / name).relative_to(path)) + "/"] = "dir"
    return out

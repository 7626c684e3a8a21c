"""Working-tree snapshots on real git repositories: never touching the user's state, limited to the
workspace folder, repositories without commits, modes and symlinks, large files, late edits."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_protocol_helpers import git, make_repo

from trainsleuth.protocol import snapshot
from trainsleuth.protocol.snapshot import SnapshotError, diff_changes, restore_files, take_snapshot


def _state(repo: Path) -> tuple[str, str, str]:
    return (
        git(repo, "status", "--porcelain", "--untracked-files=all"),
        git(repo, "diff", "--cached"),
        git(repo, "stash", "list"),
    )


def test_workspace_subfolder_only(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"proj/train.py": "lr = 10\n", "other/keep.py": "k = 1\n"})
    ws = repo / "proj"
    state = ws / ".trainsleuth"
    before = take_snapshot(ws, state, "t/before")
    assert before.prefix == "proj/" and not before.dirty
    (ws / "train.py").write_text("lr = 1\n")
    (repo / "other" / "keep.py").write_text("k = 2  # outside the workspace\n")
    after = take_snapshot(ws, state, "t/after")
    assert [c.path for c in diff_changes(before, after)] == ["proj/train.py"]
    res = restore_files(before, after)
    assert res.restored == ["proj/train.py"] and (ws / "train.py").read_text() == "lr = 10\n"
    assert (repo / "other" / "keep.py").read_text() == "k = 2  # outside the workspace\n"


def test_repository_without_commits(tmp_path: Path) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.py").write_text("a = 1\n")
    status = _state(repo)
    before = take_snapshot(repo, repo / ".trainsleuth", "t/b")
    assert before.head is None and before.dirty
    assert _state(repo) == status
    (repo / "a.py").write_text("a = 2\n")
    after = take_snapshot(repo, repo / ".trainsleuth", "t/a")
    restore_files(before, after)
    assert (repo / "a.py").read_text() == "a = 1\n"


def test_modes_symlinks_late_edits_and_large_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(
        tmp_path / "repo", {"run.sh": "#!/bin/sh\necho hi\n", "a.py": "a = 1\n", "b.py": "b = 1\n"}
    )
    os.chmod(repo / "run.sh", 0o755)
    git(repo, "add", "run.sh")
    git(repo, "commit", "-qm", "exec")
    os.symlink("a.py", repo / "link.py")
    monkeypatch.setattr(snapshot, "MAX_UNTRACKED_BYTES", 1000)
    (repo / "big.bin").write_bytes(b"x" * 5000)
    state = repo / ".trainsleuth"
    status = _state(repo)
    before = take_snapshot(repo, state, "t/before")
    assert before.skipped_large == ["big.bin"]
    assert _state(repo) == status
    (repo / "run.sh").write_text("#!/bin/sh\necho bye\n")
    os.chmod(repo / "run.sh", 0o644)
    (repo / "link.py").unlink()
    os.symlink("b.py", repo / "link.py")
    (repo / "a.py").write_text("a = 2\n")
    after = take_snapshot(repo, state, "t/after")
    (repo / "a.py").write_text("a = 3  # edited again after the snapshot\n")
    res = restore_files(before, after)
    assert sorted(res.restored) == ["link.py", "run.sh"] and res.skipped == ["a.py"]
    assert (repo / "run.sh").read_text() == "#!/bin/sh\necho hi\n" and os.access(repo / "run.sh", os.X_OK)
    assert os.readlink(repo / "link.py") == "a.py"
    assert (repo / "a.py").read_text() == "a = 3  # edited again after the snapshot\n"
    assert (repo / "big.bin").stat().st_size == 5000
    refs = git(repo, "for-each-ref", "refs/trainsleuth/")
    assert "refs/trainsleuth/t/before" in refs and "refs/trainsleuth/t/after" in refs


def test_not_a_repository(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="not inside a git repository"):
        take_snapshot(tmp_path, tmp_path / ".trainsleuth", "t/x")

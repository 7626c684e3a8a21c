"""Workspace policy on its own: resolution, containment, symlinks, refs."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainsleuth.server.workspace import PolicyError, WorkspacePolicy, check_ref


def test_relative_paths_resolve_inside(workspace: Path) -> None:
    (workspace / "logs").mkdir()
    policy = WorkspacePolicy([workspace])
    assert policy.resolve("logs/train.log") == workspace.resolve() / "logs" / "train.log"
    assert policy.resolve("logs/../logs/x") == workspace.resolve() / "logs" / "x"
    assert policy.resolve(str(workspace)) == workspace.resolve()


@pytest.mark.parametrize("raw", ["..", "../x", "logs/../../x", "/etc/passwd", "~/.ssh/id_rsa"])
def test_escapes_are_refused(workspace: Path, raw: str) -> None:
    with pytest.raises(PolicyError, match="outside the workspace"):
        WorkspacePolicy([workspace]).resolve(raw)


def test_symlink_escape_and_inner_symlink(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (workspace / "out").symlink_to(outside)
    (workspace / "real").mkdir()
    (workspace / "alias").symlink_to(workspace / "real")
    policy = WorkspacePolicy([workspace])
    with pytest.raises(PolicyError, match="symlink"):
        policy.resolve("out/file")
    assert policy.resolve("alias/f") == (workspace / "real" / "f").resolve()


def test_several_workspaces(workspace: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    policy = WorkspacePolicy([workspace, other])
    assert policy.resolve(str(other / "a")) == other.resolve() / "a"
    with pytest.raises(PolicyError):
        policy.resolve(str(tmp_path / "third"))


def test_must_exist_and_bad_strings(workspace: Path) -> None:
    policy = WorkspacePolicy([workspace])
    with pytest.raises(PolicyError, match="does not exist"):
        policy.resolve("missing.log", must_exist=True)
    with pytest.raises(PolicyError, match="null byte"):
        policy.resolve("a\x00")
    with pytest.raises(PolicyError, match="empty"):
        policy.resolve("")


def test_refs() -> None:
    assert check_ref("HEAD~3") == "HEAD~3"
    for bad in ("-x", "--output=/tmp/x", "", "  "):
        with pytest.raises(PolicyError):
            check_ref(bad)


def test_workspace_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not an existing directory"):
        WorkspacePolicy([tmp_path / "nope"])


def test_interpreter_policy(workspace: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    from trainsleuth.server.context import ServerConfig, ServerContext

    ctx = ServerContext(ServerConfig(workspaces=[workspace]))
    assert ctx.interpreter(None) == Path(sys.executable)  # no .venv in the workspace: the server's own
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(workspace / ".venv")], check=True)
    assert ctx.interpreter(None) == workspace / ".venv" / "bin" / "python"
    assert ctx.interpreter(".venv/bin/python") == workspace / ".venv" / "bin" / "python"
    other = tmp_path / "othervenv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    with pytest.raises(PolicyError, match="--allow-python"):
        ctx.interpreter(str(other / "bin" / "python"))
    allowed = ServerContext(
        ServerConfig(workspaces=[workspace], allowed_interpreters=[other / "bin" / "python"])
    )
    assert allowed.interpreter(str(other / "bin" / "python")) == other / "bin" / "python"
    with pytest.raises(PolicyError, match="does not exist"):
        ctx.interpreter(str(workspace / "nope" / "python"))


def test_entrypoints(workspace: Path, tmp_path: Path) -> None:
    from trainsleuth.server.context import ServerConfig, ServerContext
    from trainsleuth.server.registry import check_entrypoint

    ctx = ServerContext(ServerConfig(workspaces=[workspace]))
    (workspace / "train.py").write_text("def make(): ...\n")
    (tmp_path / "evil.py").write_text("def make(): ...\n")
    assert check_entrypoint("train.py:make", ctx) == f"{workspace.resolve() / 'train.py'}:make"
    assert check_entrypoint("pkg.mod:make", ctx) == "pkg.mod:make"
    for bad, why in [
        ("../evil.py:make", "outside the workspace"),
        (f"{tmp_path / 'evil.py'}:make", "outside the workspace"),
        ("missing.py:make", "does not exist"),
        ("train.py", "must look like"),
        ("-m:make", "must look like"),
        ("os;rm -rf:make", "not a valid"),
    ]:
        with pytest.raises(PolicyError, match=why):
            check_entrypoint(bad, ctx)

"""Shared fixtures: a workspace folder and an in-memory trainsleuth server on it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _private_state_root(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own per-user state folder (investigation state and signing key live there, outside
    the workspace); servers started as subprocesses inherit it through the environment."""
    root = tmp_path_factory.mktemp("state-root")
    monkeypatch.setenv("TRAINSLEUTH_STATE_DIR", str(root))
    # A refused approval answers at once in tests; tests of the wait set their own.
    monkeypatch.setenv("TRAINSLEUTH_APPROVAL_WAIT_S", "0")
    # `trainsleuth client call` starts a server per call in tests (no server outlives its test); the tests of
    # the kept server turn it on and stop it themselves.
    monkeypatch.setenv("TRAINSLEUTH_KEEP_SERVER", "0")
    return root


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def server(workspace: Path):  # type: ignore[no-untyped-def]
    srv, _ = build_server(ServerConfig(workspaces=[workspace]))
    return srv


def make_git_project(src: Path, dest: Path) -> Path:
    """A git repository at `dest` holding a copy of the fixture folder `src` (tests/data/...), committed."""
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"], cwd=dest, check=True
    )
    return dest


@pytest.fixture(scope="module")
def git_project(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], Path]:
    """make(src): a git repository holding a copy of the fixture folder `src`, made once per test module."""
    made: dict[Path, Path] = {}

    def make(src: Path) -> Path:
        if src not in made:
            made[src] = make_git_project(src, tmp_path_factory.mktemp("project") / src.name)
        return made[src]

    return make

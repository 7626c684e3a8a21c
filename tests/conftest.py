"""Shared fixtures: a workspace folder and an in-memory trainsleuth server on it."""

from __future__ import annotations

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

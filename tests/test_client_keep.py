"""The kept server of `trainsleuth client` (issue 27.4): one server per workspace alive between calls, found
again by later calls, replaced when it crashed, started once when calls race, gone when idle, its own per
environment, and a client that goes away still cancels what it was waiting for.

Everything through the real CLI in subprocesses: real Unix sockets, real `trainsleuth serve --transport unix`
processes, real git histories and jobs. Every test stops the servers it kept (`trainsleuth client stop`)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from trainsleuth.clients import keep
from trainsleuth.state.store import default_state_path
from trainsleuth.tools.bisect.testing import make_history

TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")


@pytest.fixture
def kept(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Calls go to kept servers; every server kept during the test is stopped after it."""
    monkeypatch.setenv(keep.KEEP_ENV, "1")
    env = dict(os.environ)
    yield env
    subprocess.run([TRAINSLEUTH, "client", "stop", "--all"], env=env, capture_output=True, timeout=60)
    assert not servers(), "a kept server outlived its test"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


def call(ws: Path, env: dict[str, str], tool: str = "list_investigations", *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [TRAINSLEUTH, "client", "call", tool, "--json", "--workspace", str(ws), *args],
        capture_output=True, text=True, timeout=180, cwd=ws, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return dict(json.loads(proc.stdout))


def servers() -> list[psutil.Process]:
    """The kept servers of this test's state folder."""
    root = os.environ["TRAINSLEUTH_STATE_DIR"]
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        ours = "--transport" in cmdline and "unix" in cmdline and any(root in part for part in cmdline)
        if ours and proc.status() != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.1)


def test_calls_share_one_private_kept_server(ws: Path, kept: dict[str, str]) -> None:
    call(ws, kept, "start_investigation", "--arg", "symptom=loss flat from the first step")
    (first,) = servers()
    for _ in range(3):
        assert len(call(ws, kept)["structured"]["investigations"]) == 1  # the same workspace's state
    assert [p.pid for p in servers()] == [first.pid]
    assert first.terminal() is None  # its own session: it can show no one a code
    folder = keep.runtime_dir()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    (sock,) = folder.glob("*.sock")
    assert stat.S_ISSOCK(sock.stat().st_mode) and stat.S_IMODE(sock.stat().st_mode) == 0o600
    # tools and describe use it too; a call that opts out starts a server of its own.
    for args in (["tools"], ["describe", "submit_diagnosis"]):
        subprocess.run(
            [TRAINSLEUTH, "client", *args, "--workspace", str(ws)], env=kept, check=True, capture_output=True
        )
    call(ws, kept, "list_investigations", "--no-keep")
    assert [p.pid for p in servers()] == [first.pid]
    stopped = subprocess.run(
        [TRAINSLEUTH, "client", "stop", "--workspace", str(ws)], env=kept, capture_output=True, text=True
    )
    assert f"pid {first.pid}" in stopped.stdout
    wait_until(lambda: not servers())
    assert not list(folder.glob("*.sock"))


def test_a_crashed_server_is_replaced(ws: Path, kept: dict[str, str]) -> None:
    call(ws, kept)
    (crashed,) = servers()
    crashed.send_signal(signal.SIGKILL)
    crashed.wait(10)
    assert list(keep.runtime_dir().glob("*.sock"))  # its socket is left behind, nobody listening
    call(ws, kept)
    (fresh,) = servers()
    assert fresh.pid != crashed.pid


def test_racing_first_calls_start_one_server(ws: Path, kept: dict[str, str]) -> None:
    argv = [TRAINSLEUTH, "client", "call", "list_investigations", "--json", "--workspace", str(ws)]
    procs = [
        subprocess.Popen(argv, cwd=ws, env=kept, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0 and not json.loads(out)["is_error"], err
    assert len(servers()) == 1


def test_an_idle_server_exits_by_itself(ws: Path, kept: dict[str, str]) -> None:
    call(ws, {**kept, keep.IDLE_ENV: "2"})
    assert len(servers()) == 1
    wait_until(lambda: not servers(), timeout=30)
    assert not list(keep.runtime_dir().glob("*.sock"))


def test_each_environment_and_workspace_gets_its_own_server(
    ws: Path, tmp_path: Path, kept: dict[str, str]
) -> None:
    """What a server was started with decides what it does (the interpreters it finds on PATH, the approval
    wait, its workspace): a call from another environment or workspace is never served by it."""
    other_ws = tmp_path / "other"
    other_ws.mkdir()
    call(ws, kept, "start_investigation", "--arg", "symptom=loss flat")
    call(ws, {**kept, "TRAINSLEUTH_APPROVAL_WAIT_S": "5"})
    call(ws, {**kept, "PATH": f"{tmp_path}{os.pathsep}{kept['PATH']}"})
    call(ws, {**kept, "SHLVL": "7", "OLDPWD": "/"})  # what a shell changes between commands does not count
    assert call(other_ws, kept)["structured"]["investigations"] == []
    assert len(servers()) == 4


def test_a_client_that_goes_away_cancels_its_job_but_not_the_server(
    ws: Path, tmp_path: Path, kept: dict[str, str]
) -> None:
    history = make_history(ws / "repo", 20, 12)
    pidfile, wtfile = tmp_path / "pid", tmp_path / "wt"
    command = f"pwd > {wtfile}; sleep 300 & echo $! > {pidfile}; wait"
    args = {"repo": "repo", "good": history.good, "bad": "main", "command": command}
    client = subprocess.Popen(
        [TRAINSLEUTH, "client", "call", "bisect_commits", "--workspace", str(ws), "--args-json", json.dumps(args)],
        cwd=ws, env=kept, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip() != "", timeout=120)
    (server,) = servers()
    client.send_signal(signal.SIGKILL)  # the assistant's call is gone (a ^C, a closed shell)
    client.wait(10)
    sleeper = int(pidfile.read_text())
    worktree = Path(wtfile.read_text().strip())
    wait_until(
        lambda: not psutil.pid_exists(sleeper) or psutil.Process(sleeper).status() == psutil.STATUS_ZOMBIE
    )
    wait_until(lambda: not worktree.exists())
    conn = sqlite3.connect(default_state_path(ws))
    try:
        wait_until(lambda: conn.execute("SELECT status FROM jobs").fetchone()[0] == "cancelled")
    finally:
        conn.close()
    assert server.is_running() and [p.pid for p in servers()] == [server.pid]
    call(ws, kept)  # and it still serves


# The other user runs the system's Python: this test's interpreter may sit where that user cannot go.
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.mark.skipif(
    not hasattr(os, "getuid") or os.getuid() != 0 or not os.path.exists(SYSTEM_PYTHON),
    reason="connecting as another user needs root",
)
def test_another_user_cannot_reach_or_use_the_socket(ws: Path, kept: dict[str, str]) -> None:
    call(ws, kept)
    (keep_sock,) = keep.runtime_dir().glob("*.sock")
    probe = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        f"    s.connect({str(keep_sock)!r})\n"
        "except OSError as e:\n"
        "    print('refused', e.errno); sys.exit(0)\n"
        "try:\n"
        '    s.sendall(b\'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\\n\')\n'
        "    data = s.recv(100)\n"
        "except OSError:\n"
        "    data = b''  # reset: closed without a word\n"
        "print('answer', data)\n"
    )
    nobody = 65534
    reach = subprocess.run(
        [SYSTEM_PYTHON, "-c", probe], user=nobody, capture_output=True, text=True, timeout=30
    )
    assert reach.stdout.startswith("refused"), reach.stdout + reach.stderr  # the folder is the user's alone
    # A server whose socket anyone could reach still checks who connects: closed without a word.
    open_dir = Path(tempfile.mkdtemp(prefix="ts-open-", dir="/tmp"))
    try:
        os.chmod(open_dir, 0o755)
        sock = open_dir / "s.sock"
        server = subprocess.Popen(
            [TRAINSLEUTH, "serve", "--workspace", str(ws), "--transport", "unix", "--socket", str(sock)],
            cwd=ws, env=kept, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_until(sock.exists)
            os.chmod(sock, 0o666)
            used = subprocess.run(
                [SYSTEM_PYTHON, "-c", probe.replace(str(keep_sock), str(sock))],
                user=nobody, capture_output=True, text=True, timeout=30,
            )  # fmt: skip
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(30)
    finally:
        shutil.rmtree(open_dir, ignore_errors=True)
    assert used.stdout.strip() == "answer b''", used.stdout + used.stderr

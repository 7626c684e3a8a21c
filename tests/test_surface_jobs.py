"""Long tool calls answer within the clients' timeouts (issue 18.5, 22.2): a long_running tool runs
as a job in a process of its own; the call relays its progress, hands back a job id when its wait
is over, and get_job returns the result later, even from another server process. A call whose
client goes away cancels its job at once: its processes die and its worktrees go."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import psutil
import pytest
from mcp import Client, StdioServerParameters

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.state.store import default_state_path
from trainsleuth.tools.bisect.testing import History, make_history, tree_digest

TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")


@pytest.fixture
def history(workspace: Path) -> History:
    return make_history(workspace / "repo", 40, 27)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _job_row(workspace: Path, job_id: str) -> dict[str, object]:
    conn = sqlite3.connect(default_state_path(workspace))
    conn.row_factory = sqlite3.Row
    try:
        row = conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return dict(row)
    finally:
        conn.close()


def _running_jobs(workspace: Path) -> list[dict[str, object]]:
    db = default_state_path(workspace)
    if not db.exists():
        return []
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM jobs WHERE status = 'running'")]
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


async def _wait_until(predicate, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        await anyio.sleep(0.1)


@pytest.mark.anyio
async def test_a_long_call_hands_back_a_job_that_get_job_finishes(workspace: Path, history: History) -> None:
    server, _ = build_server(ServerConfig(workspaces=[workspace], call_wait_s=5.0))
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with Client(server) as client:
        started = time.monotonic()
        first = await client.call_tool(
            "bisect_commits",
            {"repo": "repo", "good": history.good, "bad": "main", "command": "sleep 1.5; test ! -f bug"},
            progress_callback=on_progress,
        )
        assert time.monotonic() - started < 15  # the call answers after its wait, not after the bisect
        assert not first.is_error, first.content[0].text
        job = first.structured_content
        assert job is not None and job["status"] == "running"
        job_id = job["job_id"]
        assert f"get_job(job_id='{job_id}'" in first.content[0].text
        assert any(m.startswith("step 1 of about") and m.endswith(f"(job {job_id})") for m in progress)
        # The job runs in a process of its own, not in the server.
        row = _job_row(workspace, job_id)
        assert row["owner_pid"] != os.getpid() and row["waiter_pid"] is None

        result = None
        for _ in range(10):
            result = await client.call_tool("get_job", {"job_id": job_id, "wait_s": 40})
            if result.structured_content and result.structured_content["status"] != "running":
                break
        assert result is not None and not result.is_error, result.content[0].text
        final = result.structured_content
        assert final is not None and final["status"] == "succeeded"
        assert final["result"]["first_bad_commit"]["hash"] == history.bug_commit
        assert f"first bad commit {history.bug_commit}" in result.content[0].text
        # A wait beyond the clients' timeouts is cut to the call's limit, not refused (issue 27.2).
        longer = await client.call_tool("get_job", {"job_id": job_id, "wait_s": 120})
        assert not longer.is_error, longer.content[0].text
        assert longer.structured_content is not None and longer.structured_content["status"] == "succeeded"


def test_a_job_started_by_client_call_survives_its_per_call_server(workspace: Path, history: History) -> None:
    """`trainsleuth client call` starts a server per call: the job must outlive it (issue 22.2)."""

    def call(*args: str) -> dict[str, object]:
        proc = subprocess.run(
            [TRAINSLEUTH, "client", "call", *args, "--json", "--workspace", str(workspace)],
            capture_output=True, text=True, timeout=180, cwd=workspace,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr + proc.stdout
        return json.loads(proc.stdout)  # type: ignore[no-any-return]

    started = call(
        "bisect_commits", "--arg", "repo=repo", "--arg", f"good={history.good}", "--arg", "bad=main",
        "--arg", "command=sleep 0.5; test ! -f bug", "--arg", "background=true",
    )  # fmt: skip
    job = started["structured"]
    assert isinstance(job, dict) and job["status"] == "running"
    runner = int(_job_row(workspace, str(job["job_id"]))["owner_pid"])  # type: ignore[arg-type]
    assert _alive(runner)  # the server of that call is gone; its job is not
    done: dict[str, object] = {}
    for _ in range(10):
        done = call("get_job", "--arg", f"job_id={job['job_id']}", "--arg", "wait_s=40")
        if done["structured"]["status"] != "running":  # type: ignore[index]
            break
    final = done["structured"]
    assert final["status"] == "succeeded", done  # type: ignore[index]
    assert final["result"]["first_bad_commit"]["hash"] == history.bug_commit  # type: ignore[index]


@pytest.mark.anyio
async def test_a_client_that_goes_away_cancels_its_job_at_once(
    workspace: Path, history: History, tmp_path: Path
) -> None:
    """The server of a waiting call dies (its client disconnected): the job kills its test and
    removes its worktree within seconds, and is recorded as cancelled."""
    before = tree_digest(history.path)
    pidfile, wtfile = tmp_path / "pid", tmp_path / "wt"
    command = f"pwd > {wtfile}; sleep 300 & echo $! > {pidfile}; wait"
    params = StdioServerParameters(
        command=TRAINSLEUTH,
        args=["serve", "--workspace", str(workspace)],
        cwd=str(workspace),
        env=dict(os.environ),
    )
    job: dict[str, object] = {}
    with anyio.move_on_after(90):
        try:
            async with Client(params) as client:
                async with anyio.create_task_group() as tg:

                    async def call() -> None:
                        await client.call_tool(
                            "bisect_commits",
                            {"repo": "repo", "good": history.good, "bad": "main", "command": command},
                        )

                    tg.start_soon(call)
                    await _wait_until(lambda: pidfile.exists() and pidfile.read_text().strip() != "")
                    job = _running_jobs(workspace)[0]
                    server_pid = int(job["waiter_pid"])  # type: ignore[arg-type]
                    os.kill(server_pid, signal.SIGKILL)  # the client's connection is gone with it
                    tg.cancel_scope.cancel()
        except Exception:  # the transport breaks under the client: expected here
            pass
    sleeper = int(pidfile.read_text())
    worktree = Path(wtfile.read_text().strip())
    await _wait_until(lambda: not _alive(sleeper), timeout=30)
    await _wait_until(lambda: not worktree.exists(), timeout=30)
    await _wait_until(lambda: _job_row(workspace, str(job["id"]))["status"] == "cancelled", timeout=30)
    assert not (history.path / ".git" / "worktrees").exists()
    assert tree_digest(history.path) == before


@contextmanager
def http_server(workspace: Path, token: str, env: dict[str, str]) -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen(
        [TRAINSLEUTH, "serve", "--transport", "http", "--port", str(port), "--workspace", str(workspace),
         "--token", token],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, **env},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "server exited"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP server did not start"
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.anyio
async def test_long_calls_over_http_relay_progress_and_hand_back_the_job(
    workspace: Path, history: History
) -> None:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    with http_server(workspace, "s3cret", {"TRAINSLEUTH_CALL_WAIT_S": "5"}) as port:
        http = create_mcp_http_client(headers={"Authorization": "Bearer s3cret"})
        async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client:
            first = await client.call_tool(
                "bisect_commits",
                {"repo": "repo", "good": history.good, "bad": "main", "command": "sleep 1.5; test ! -f bug"},
                progress_callback=on_progress,
            )
            job = first.structured_content
            assert job is not None and job["status"] == "running", first.content[0].text
            assert any(m.startswith("step 1 of about") for m in progress)
            final = None
            for _ in range(10):
                done = await client.call_tool("get_job", {"job_id": job["job_id"], "wait_s": 40})
                final = done.structured_content
                if final and final["status"] != "running":
                    break
            assert final is not None and final["result"]["first_bad_commit"]["hash"] == history.bug_commit

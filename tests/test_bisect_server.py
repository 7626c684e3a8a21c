"""bisect_commits, get_job and cancel_job through a real MCP client (in memory): progress
notifications on the open request, background jobs followed with get_job, cancellation that
kills the test's process tree and removes the worktrees, and the workspace policy."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import anyio
import psutil
import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.tools.bisect.testing import History, make_history, tree_digest


@pytest.fixture
def history(workspace: Path) -> History:
    history = make_history(workspace / "repo", 200, 133)
    # The user is in the middle of something: a stash, a staged and an unstaged change.
    repo = history.path
    (repo / "counter.txt").write_text("stashed\n")
    subprocess.run(["git", "-C", str(repo), "stash", "push", "-q"], check=True)
    (repo / "counter.txt").write_text("edited\n")
    (repo / "new.txt").write_text("new\n")
    subprocess.run(["git", "-C", str(repo), "add", "new.txt"], check=True)
    return history


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.mark.anyio
async def test_foreground_bisect_reports_progress_and_leaves_checkout_alone(
    workspace: Path, history: History
) -> None:
    before = tree_digest(history.path)
    server, registry = build_server(ServerConfig(workspaces=[workspace]))
    assert {"bisect_commits", "bisect_versions", "get_job", "cancel_job"}.isdisjoint(registry.placeholders)
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with Client(server) as client:
        result = await client.call_tool(
            "bisect_commits",
            {"repo": "repo", "good": history.good, "bad": "main", "command": "test ! -f bug"},
            progress_callback=on_progress,
        )
    assert not result.is_error, result.content[0].text
    job = result.structured_content
    # Finished within the call's wait: the bisect's own result, with its job id.
    assert job is not None and job["status"] == "succeeded" and job["job_id"].startswith("job-")
    assert job["first_bad_commit"]["hash"] == history.bug_commit
    assert job["runs"] == job["bisect_runs"] == len(job["steps"]) <= 8
    text = result.content[0].text
    assert f"first bad commit {history.bug_commit}" in text and "diffstat: 2 files" in text
    messages = [m for _, _, m in progress if m]
    assert messages[0].startswith("step 1 of about 8: testing ")
    assert all(m.endswith(f"(job {job['job_id']})") for m in messages)
    assert any(m.startswith("step 2 of about") for m in messages)
    assert tree_digest(history.path) == before


@pytest.mark.anyio
async def test_background_job_is_followed_with_get_job_progress(workspace: Path, history: History) -> None:
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with Client(server) as client:
        started = await client.call_tool(
            "bisect_commits",
            {
                "repo": "repo",
                "good": history.good,
                "bad": "main",
                "command": "sleep 0.2; test ! -f bug",
                "background": True,
            },
        )
        job = started.structured_content
        assert job is not None and job["status"] == "running" and "get_job" in job["next_step"]
        done = await client.call_tool(
            "get_job", {"job_id": job["job_id"], "wait_s": 40}, progress_callback=on_progress
        )
        final = done.structured_content
        assert final is not None and final["status"] == "succeeded"
        assert final["result"]["first_bad_commit"]["hash"] == history.bug_commit
        assert len([m for m in progress if m.startswith("step ")]) >= 2
        # Without waiting, get_job just answers.
        again = await client.call_tool("get_job", {"job_id": job["job_id"]})
        assert again.structured_content["status"] == "succeeded"  # type: ignore[index]


@pytest.mark.anyio
async def test_short_wait_hands_back_a_running_job(workspace: Path, history: History) -> None:
    server, _ = build_server(ServerConfig(workspaces=[workspace], call_wait_s=0.5))
    async with Client(server) as client:
        result = await client.call_tool(
            "bisect_commits", {"repo": "repo", "good": history.good, "bad": "main", "command": "sleep 30"}
        )
        job = result.structured_content
        assert job is not None and job["status"] == "running" and "get_job" in job["next_step"]
        assert "still running after 0.5 s" in result.content[0].text
        cancelled = await client.call_tool("cancel_job", {"job_id": job["job_id"]})
        assert cancelled.structured_content["status"] == "cancelled"  # type: ignore[index]


@pytest.mark.anyio
async def test_cancel_kills_the_test_tree_and_removes_worktrees(
    workspace: Path, history: History, tmp_path: Path
) -> None:
    before = tree_digest(history.path)
    pidfile, wtfile = tmp_path / "pid", tmp_path / "wt"
    command = f"pwd > {wtfile}; sleep 300 & echo $! > {pidfile}; wait"
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        started = await client.call_tool(
            "bisect_commits",
            {"repo": "repo", "good": history.good, "bad": "main", "command": command, "background": True},
        )
        job_id = started.structured_content["job_id"]  # type: ignore[index]
        deadline = time.monotonic() + 30
        while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        sleeper = int(pidfile.read_text())
        worktree = Path(wtfile.read_text().strip())
        assert _alive(sleeper) and worktree.is_dir()
        running = await client.call_tool("get_job", {"job_id": job_id})
        assert running.structured_content["status"] == "running"  # type: ignore[index]
        assert running.structured_content["current"]  # type: ignore[index]

        result = await client.call_tool("cancel_job", {"job_id": job_id})
        assert not result.is_error
        job = result.structured_content
        assert job is not None and job["status"] == "cancelled"
        assert not _alive(sleeper)
        assert not worktree.exists() and not worktree.parent.exists()
        assert not (history.path / ".git" / "worktrees").exists()
        assert tree_digest(history.path) == before

        again = await client.call_tool("cancel_job", {"job_id": job_id})
        assert "already finished" in again.structured_content["note"]  # type: ignore[index]


@pytest.mark.anyio
async def test_cancelling_the_request_cancels_its_job(
    workspace: Path, history: History, tmp_path: Path
) -> None:
    before = tree_digest(history.path)
    pidfile = tmp_path / "pid"
    command = f"sleep 300 & echo $! > {pidfile}; wait"
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                await client.call_tool(
                    "bisect_commits",
                    {"repo": "repo", "good": history.good, "bad": "main", "command": command},
                )

            tg.start_soon(call)
            deadline = time.monotonic() + 30
            while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
                await anyio.sleep(0.05)
            tg.cancel_scope.cancel()  # the client gives up on its request
        sleeper = int(pidfile.read_text())
        deadline = time.monotonic() + 20
        while _alive(sleeper) and time.monotonic() < deadline:
            await anyio.sleep(0.1)
        assert not _alive(sleeper)
    deadline = time.monotonic() + 20
    while (history.path / ".git" / "worktrees").exists() and time.monotonic() < deadline:
        await anyio.sleep(0.1)
    assert tree_digest(history.path) == before


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"good": "-x"}, "begins with '-'"),
        ({"bad": "--output=/tmp/x"}, "begins with '-'"),
        ({"repo": "/etc"}, "outside the workspace"),
        ({"repo": "../.."}, "outside the workspace"),
        ({"good": "no-such-tag"}, "is not a commit"),
        ({"command": "definitely-not-installed-prog"}, "was not found on PATH"),
        ({"command": "exit 1"}, "good and bad both fail"),
        ({"env": "uv"}, "needs a uv.lock"),
        ({"env": "uv", "python": "/bin/sh"}, "outside the workspace and not allowed"),
    ],
)
async def test_bad_input_is_an_error_with_a_next_step(
    workspace: Path, args: dict[str, str], message: str
) -> None:
    history = make_history(workspace / "repo", 12, 6)
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    base = {"repo": "repo", "good": history.good, "bad": "main", "command": "test ! -f bug"}
    async with Client(server) as client:
        result = await client.call_tool("bisect_commits", {**base, **args})
    assert result.is_error
    assert message in result.content[0].text


@pytest.mark.anyio
async def test_good_not_ancestor_is_refused(workspace: Path) -> None:
    history = make_history(workspace / "repo", 12, 6)
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        result = await client.call_tool(
            "bisect_commits", {"repo": "repo", "good": "main", "bad": history.good, "command": "true"}
        )
    assert result.is_error and "not an ancestor" in result.content[0].text
    assert "Next step:" in result.content[0].text


@pytest.mark.anyio
async def test_unknown_job_is_an_error(workspace: Path) -> None:
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        for tool in ("get_job", "cancel_job"):
            result = await client.call_tool(tool, {"job_id": "job-000000000000"})
            assert result.is_error and "no job 'job-000000000000'" in result.content[0].text

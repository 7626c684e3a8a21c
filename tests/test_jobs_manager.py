"""The background-job runner: statuses, progress, cancellation (in-process and through the store),
cleanup of registered folders, and recovery after the owning process died."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.state.store import Store
from trainsleuth.tools.bisect.testing import make_history, tree_digest
from trainsleuth.tools.job_records import JobError
from trainsleuth.tools.jobs import JobHandle, JobManager, manager_for


def store_at(tmp_path: Path) -> Store:
    return Store(tmp_path / ".trainsleuth" / "state.db")


def test_job_result_and_progress_are_persisted(tmp_path: Path) -> None:
    mgr = JobManager(store_at(tmp_path))

    def work(handle: JobHandle) -> dict[str, object]:
        handle.progress(1, 2, "halfway", "abc")
        return {"answer": 42}

    rec = mgr.submit("demo", work, title="demo job", params={"x": 1})
    assert rec.status == "running" and rec.id.startswith("job-")
    done = mgr.wait(rec.id, 10)
    assert done.status == "succeeded" and done.result == {"answer": 42}
    assert (done.progress_done, done.progress_total, done.progress_message, done.current) == (
        1,
        2,
        "halfway",
        "abc",
    )
    # A fresh handle on the same store (another process, or after a restart) sees the same.
    again = JobManager(store_at(tmp_path)).get(rec.id)
    assert again.status == "succeeded" and again.result == {"answer": 42} and again.params == {"x": 1}


def test_failures_are_recorded_with_next_step(tmp_path: Path) -> None:
    mgr = JobManager(store_at(tmp_path))

    def expected(handle: JobHandle) -> dict[str, object]:
        raise JobError("the good commit fails too", "pick an older good commit")

    def unexpected(handle: JobHandle) -> dict[str, object]:
        raise ValueError("boom")

    a = mgr.wait(mgr.submit("demo", expected).id, 10)
    assert (a.status, a.error, a.next_step) == (
        "failed",
        "the good commit fails too",
        "pick an older good commit",
    )
    b = mgr.wait(mgr.submit("demo", unexpected).id, 10)
    assert b.status == "failed" and "ValueError: boom" in (b.error or "") and b.next_step


def test_unknown_job_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(JobError, match="no job 'job-nope'"):
        JobManager(store_at(tmp_path)).get("job-nope")


def test_cancel_kills_the_process_tree_and_removes_registered_folders(tmp_path: Path) -> None:
    from trainsleuth.process import run_process

    mgr = JobManager(store_at(tmp_path))
    scratch = tmp_path / "scratch"
    pidfile = tmp_path / "pid"

    def work(handle: JobHandle) -> dict[str, object]:
        handle.add_cleanup({"kind": "dir", "path": str(scratch)})
        scratch.mkdir()
        run_process(
            ["/bin/sh", "-c", f"sleep 300 & echo $! > {pidfile}; wait"], cancel_event=handle.cancel_event
        )
        handle.check_cancelled()
        return {}

    rec = mgr.submit("demo", work)
    deadline = time.monotonic() + 20
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    sleeper = int(pidfile.read_text())
    assert psutil.pid_exists(sleeper)
    done = mgr.cancel(rec.id)
    assert done.status == "cancelled" and done.next_step
    assert not scratch.exists()
    assert not psutil.pid_exists(sleeper) or psutil.Process(sleeper).status() == psutil.STATUS_ZOMBIE
    assert mgr.cancel(rec.id).status == "cancelled"  # cancelling a finished job changes nothing


def test_cancel_through_the_store_reaches_the_owner(tmp_path: Path) -> None:
    mgr = JobManager(store_at(tmp_path))
    started = threading.Event()

    def work(handle: JobHandle) -> dict[str, object]:
        started.set()
        if not handle.cancel_event.wait(20):
            return {"finished": True}
        handle.check_cancelled()
        return {}

    rec = mgr.submit("demo", work)
    assert started.wait(10)
    # What another process does: it only has the store.
    with mgr.store.transaction() as conn:
        conn.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?", (rec.id,))
    assert mgr.wait(rec.id, 10).status == "cancelled"


def test_recovery_leaves_jobs_of_live_processes_alone(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    mgr = JobManager(store)
    release = threading.Event()
    rec = mgr.submit("demo", lambda h: {"ok": release.wait(20)})
    other = JobManager(store)  # e.g. a second server in this same process
    assert rec.id not in other.recovered
    assert other.get(rec.id).status == "running"
    release.set()
    assert mgr.wait(rec.id, 10).status == "succeeded"


OWNER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from trainsleuth.state.store import Store
    from trainsleuth.tools.jobs import manager_for
    from trainsleuth.tools.bisect.commits import prepare_commit_bisect, run_commit_bisect

    store = Store(Path(sys.argv[1]))
    plan = prepare_commit_bisect(Path(sys.argv[2]), sys.argv[3], "main", sys.argv[4], timeout_s=None)
    rec = manager_for(store).submit("bisect_commits", lambda h: run_commit_bisect(plan, h))
    print(rec.id, flush=True)
    time.sleep(600)
    """
)


@pytest.mark.anyio
async def test_restart_marks_running_job_interrupted_and_removes_its_worktrees(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    history = make_history(workspace / "repo", 30, 12)
    before = tree_digest(history.path)
    from trainsleuth.state.store import default_state_path

    state = default_state_path(workspace)  # where the server keeps the workspace's state
    marker = tmp_path / "worktree-path"
    command = f"pwd > {marker}; sleep 300"
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT, str(state), str(history.path), history.good, command],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert owner.stdout is not None
        job_id = owner.stdout.readline().strip()
        deadline = time.monotonic() + 30
        while not (marker.exists() and marker.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        worktree = Path(marker.read_text().strip())
        assert worktree.is_dir() and (history.path / ".git" / "worktrees").is_dir()
    finally:
        # The server dies hard: no cleanup runs. Its test (a child in its own session) is killed too.
        children = psutil.Process(owner.pid).children(recursive=True)
        os.killpg(owner.pid, signal.SIGKILL)
        for child in children:
            try:
                child.kill()
            except psutil.Error:
                pass
        owner.wait()

    row = Store(state)
    with row.connect() as conn:
        status = conn.execute("SELECT status, cleanup FROM jobs WHERE id = ?", (job_id,)).fetchone()
    assert status["status"] == "running" and json.loads(status["cleanup"])  # left as the crash left it

    server, _ = build_server(ServerConfig(workspaces=[workspace]))  # the restart
    async with Client(server) as client:
        result = await client.call_tool("get_job", {"job_id": job_id})
    assert not result.is_error
    job = result.structured_content
    assert job is not None and job["status"] == "interrupted"
    assert "stopped before it finished" in job["error"] and job["next_step"]
    assert not worktree.exists() and not worktree.parent.exists()
    assert not (history.path / ".git" / "worktrees").exists()
    assert tree_digest(history.path) == before
    assert manager_for(Store(state)).get(job_id).cleanup == []


def test_worktree_whose_folder_is_gone_still_loses_gits_record(tmp_path: Path) -> None:
    import shutil

    from trainsleuth.tools.jobs import remove_worktree

    history = make_history(tmp_path / "repo", 3, 1)
    wt = tmp_path / "wt" / "ts-bisect-x"
    subprocess.run(
        ["git", "-C", str(history.path), "worktree", "add", "--detach", "-q", str(wt), "HEAD"], check=True
    )
    assert (history.path / ".git" / "worktrees").is_dir()
    shutil.rmtree(wt)
    remove_worktree(str(history.path), str(wt))
    assert not (history.path / ".git" / "worktrees").exists()

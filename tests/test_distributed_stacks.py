"""dump_stacks on real processes: a 2-rank gloo job that hangs because one rank skips a barrier."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import Client

from trainsleuth.process import kill_tree
from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.tools.distributed.stacks import PTRACE_HINT, analyse_threads, is_permission_error

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "distributed"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(paths: list[Path], proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(p.exists() for p in paths):
            return
        if proc.poll() is not None:
            raise AssertionError(f"the job exited early with {proc.returncode}")
        time.sleep(0.2)
    raise AssertionError("the ranks never reached the hang")


def _wait_for_record(
    path: Path, needle: bytes, proc: subprocess.Popen[bytes], timeout: float = 120.0
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and needle in path.read_bytes():
            return
        if proc.poll() is not None:
            raise AssertionError(f"the job exited early with {proc.returncode}")
        time.sleep(0.2)
    raise AssertionError(f"{path} never recorded {needle!r}")


@pytest.mark.anyio
async def test_hanging_job_with_a_skipped_barrier_is_diagnosed_and_ended(workspace: Path) -> None:
    shutil.copy(EXAMPLES / "hang_skip_barrier.py", workspace / "hang_skip_barrier.py")
    ready = workspace / "ready"
    ready.mkdir()
    fr = workspace / "fr"
    env = dict(
        os.environ,
        TS_HANG_READY_DIR=str(ready),
        TS_HANG_SECONDS="240",
        OMP_NUM_THREADS="1",
        TORCH_FR_BUFFER_SIZE="200",
        TS_FR_PREFIX=str(fr / "rank"),
    )
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    argv += ["--master_addr", "127.0.0.1", "--master_port", str(_free_port()), "hang_skip_barrier.py"]
    job = subprocess.Popen(
        argv,
        cwd=workspace,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for([ready / "rank0.ready", ready / "rank1.ready"], job)
        rank_pids = {int((ready / f"rank{r}.ready").read_text()) for r in (0, 1)}
        _wait_for_record(fr / "rank0", b"barrier", job)  # each rank rewrites its dump every second
        server, _ = build_server(ServerConfig(workspaces=[workspace]))
        async with Client(server) as client:
            result = await client.call_tool(
                "dump_stacks",
                {
                    "pattern": r"hang_skip_barrier\.py",
                    "samples": 2,
                    "interval_s": 0.5,
                    "flight_recorder": "fr",
                },
            )
        assert not result.is_error, result.content[0].text
        data = result.structured_content
        procs = {p["pid"]: p for p in data["processes"]}
        assert rank_pids <= set(procs)
        ranks = {p["rank"]: p for p in data["processes"] if p["role"] == "rank"}
        assert ranks[0]["collective"] == "barrier"
        assert "hang_skip_barrier.py" in ranks[0]["call_site"]
        assert ranks[1]["collective"] is None
        assert "evaluate" in ranks[1]["where"]
        assert [p["role"] for p in data["processes"] if p["rank"] is None] == ["launcher"]
        # three signatures: the torchrun agent, rank 0 in barrier, rank 1 in evaluate
        assert len(data["groups"]) == 3
        assert any(g["collective"] == "barrier" and g["ranks"] == [0] for g in data["groups"])
        finding, recorded = data["findings"]  # from the stacks, then from the Flight Recorder
        assert finding["code"] == "collective_mismatch"
        assert finding["severity"] == "error"
        assert finding["evidence"]["by_rank"]["0"]["collective"] == "barrier"
        assert finding["evidence"]["by_rank"]["1"]["collective"] is None
        assert "never reached" in finding["message"]
        assert "collective_mismatch" in result.content[0].text
        # the engine's own records, from real gloo dumps: rank 1 never entered barrier #2
        assert (
            recorded["code"] == "collective_mismatch" and recorded["evidence"]["source"] == "flight_recorder"
        )
        assert recorded["evidence"]["missing_ranks"] == [1] and recorded["evidence"]["seq"] == 2
        assert recorded["evidence"]["collective"] == "barrier"
        problem = data["flight_recorder"]["problem"]
        assert problem["calls"][0]["call_site"].startswith("main (hang_skip_barrier.py:")
        assert problem["elsewhere"]["1"].startswith("#1 all_reduce [[4]] (completed)")
        side = data["side_by_side"]
        assert side[0].startswith("rank 0: waits in barrier at main (hang_skip_barrier.py:")
        assert "| #2 barrier" in side[0] and "(pending)" in side[0]
        assert (
            side[1].startswith("rank 1: in evaluate (hang_skip_barrier.py:") and "| #1 all_reduce" in side[1]
        )
        assert "stacks | Flight Recorder, per rank:" in result.content[0].text
    finally:
        kill_tree(job.pid)
        job.wait(timeout=30)
    for pid in rank_pids:  # the whole job is gone, workers included
        assert (
            not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
        )


@pytest.mark.anyio
async def test_single_process_by_pid_has_no_mismatch(workspace: Path) -> None:
    script = workspace / "idle.py"
    script.write_text("import time\n\ndef wait_here():\n    time.sleep(120)\n\nwait_here()\n")
    proc = subprocess.Popen([sys.executable, str(script)], cwd=workspace, start_new_session=True)
    try:
        time.sleep(0.5)
        server, _ = build_server(ServerConfig(workspaces=[workspace]))
        async with Client(server) as client:
            result = await client.call_tool("dump_stacks", {"pids": [proc.pid], "samples": 1})
        assert not result.is_error, result.content[0].text
        [p] = result.structured_content["processes"]
        assert p["role"] == "process" and p["collective"] is None
        assert any(f["name"] == "wait_here" for f in p["main_stack"])
        assert p["where"] == "wait_here (idle.py:4)"
        assert result.structured_content["findings"] == []
        async with Client(server) as client:
            native = await client.call_tool("dump_stacks", {"pids": [proc.pid], "samples": 1, "native": True})
        assert not native.is_error, native.content[0].text
        [p] = native.structured_content["processes"]
        assert any(".so" in f["file"] for f in p["main_stack"])  # C frames: libc, libpython
        assert p["where"] == "wait_here (idle.py:4)"
    finally:
        kill_tree(proc.pid)
        proc.wait(timeout=10)


@pytest.mark.anyio
async def test_bad_requests_are_refused(workspace: Path, tmp_path: Path) -> None:
    outsider = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path)
    try:
        server, _ = build_server(ServerConfig(workspaces=[workspace]))
        async with Client(server) as client:
            r = await client.call_tool("dump_stacks", {})
            assert r.is_error and "pids or a pattern" in r.content[0].text
            r = await client.call_tool("dump_stacks", {"pattern": "no-such-job-xyz-123"})
            assert r.is_error and "no process matches" in r.content[0].text
            r = await client.call_tool("dump_stacks", {"pattern": "("})
            assert r.is_error and "regular expression" in r.content[0].text
            r = await client.call_tool("dump_stacks", {"pids": [os.getpid()]})
            assert r.is_error and "trainsleuth server" in r.content[0].text
            r = await client.call_tool("dump_stacks", {"pids": [outsider.pid]})
            assert r.is_error and "inside the workspace" in r.content[0].text
    finally:
        outsider.kill()
        outsider.wait()


def test_ptrace_refusal_is_explained() -> None:
    # py-spy's own wording when the kernel refuses to attach
    message = "Error: Failed to get process executable name. Check that the process is running.\nReason: Permission denied (os error 13)"
    assert is_permission_error(message)
    assert not is_permission_error("Error: No such file or directory (os error 2)")
    hint = PTRACE_HINT.format(scope="1")
    assert "ptrace_scope=0" in hint and "--cap-add SYS_PTRACE" in hint


def test_collective_detection_names_the_outermost_torch_call() -> None:
    threads = [
        {
            "thread_name": "MainThread",
            "os_thread_id": 10,
            "frames": [
                {
                    "name": "all_gather",
                    "filename": "/x/site-packages/torch/distributed/distributed_c10d.py",
                    "line": 1,
                },
                {
                    "name": "all_gather_object",
                    "filename": "/x/site-packages/torch/distributed/distributed_c10d.py",
                    "line": 2,
                },
                {
                    "name": "wrapper",
                    "filename": "/x/site-packages/torch/distributed/c10d_logger.py",
                    "line": 3,
                },
                {
                    "name": "sync_metrics",
                    "filename": "/work/train.py",
                    "line": 40,
                    "short_filename": "train.py",
                },
            ],
        }
    ]
    info = analyse_threads(threads, 10)
    assert info["collective"] == "all_gather_object"
    assert info["call_site"] == "sync_metrics (train.py:40)"
    assert info["where"] == "sync_metrics (train.py:40)"

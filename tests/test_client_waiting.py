"""Waiting on jobs (issue 27.2): get_job cuts a wait above the per-call limit instead of refusing it and says
how long it waited; `trainsleuth client call` waits as long as asked by repeating get_job; a poll is never
evidence, and a finished job's result is evidence once.

Real bisect jobs on a real git history, a real server (in memory, or started by the real CLI), the server's
per-call limit lowered to 1 s through TRAINSLEUTH_CALL_WAIT_S so the jobs outlast their calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.tools.bisect.testing import History, make_history

TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")
SLOW_TEST = "sleep 1; test ! -f bug"


@pytest.fixture
def history(tmp_path: Path) -> History:
    return make_history(tmp_path / "ws", 8, 5)


def cli(ws: Path, *args: str) -> dict[str, Any]:
    env = {**os.environ, "TRAINSLEUTH_CALL_WAIT_S": "1"}
    proc = subprocess.run(
        [TRAINSLEUTH, "client", "call", *args, "--json", "--workspace", str(ws)],
        capture_output=True, text=True, timeout=300, cwd=ws, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return dict(json.loads(proc.stdout))


def bisect_args(history: History, **extra: Any) -> dict[str, Any]:
    return {"repo": ".", "good": history.good, "bad": "main", "command": SLOW_TEST, **extra}


@pytest.mark.anyio
async def test_get_job_cuts_a_long_wait_and_says_so(history: History) -> None:
    server, _ = build_server(ServerConfig(workspaces=[history.path], call_wait_s=1.0))
    async with Client(server) as client:
        first = await client.call_tool("bisect_commits", bisect_args(history))
        job = first.structured_content
        assert job is not None and job["status"] == "running", first.content[0].text
        got = await client.call_tool("get_job", {"job_id": job["job_id"], "wait_s": 120})
        assert not got.is_error, got.content[0].text  # not refused
        out = got.structured_content
        assert (
            out is not None and out["status"] == "running" and 0.5 <= out["waited_s"] <= 5
        )  # the bisect takes ~6 s
        assert "still running after waiting" in got.content[0].text
        assert "of the 120 s asked (at most 1 s per call)" in got.content[0].text
        await client.call_tool("cancel_job", {"job_id": job["job_id"]})


def test_a_tool_that_hands_back_a_job_is_followed_to_its_result_by_default(history: History) -> None:
    """Blind runs: each submit_diagnosis/verify_fix that became a job cost a get_job call; one command now
    gives the result (unless the call asked for a background job, or --wait 0)."""
    ws = history.path
    done = cli(ws, "bisect_commits", "--args-json", json.dumps(bisect_args(history)))
    assert done["structured"]["status"] == "succeeded", done["text"]
    assert "first bad commit" in done["text"].lower(), done["text"]
    background = cli(ws, "bisect_commits", "--args-json", json.dumps(bisect_args(history, background=True)))
    assert background["structured"]["status"] == "running"
    cli(ws, "cancel_job", "--arg", f"job_id={background['structured']['job_id']}")


def test_client_call_waits_as_long_as_asked(history: History) -> None:
    ws = history.path
    started = cli(ws, "bisect_commits", "--args-json", json.dumps(bisect_args(history)), "--wait", "0")
    assert started["structured"]["status"] == "running"
    # One get_job call from the shell waits the whole 300 s asked for if needed: the CLI repeats get_job.
    done = cli(ws, "get_job", "--arg", f"job_id={started['structured']['job_id']}", "--arg", "wait_s=300")
    assert not done["is_error"] and done["structured"]["status"] == "succeeded"
    assert done["structured"]["result"]["first_bad_commit"]["hash"] == history.bug_commit
    # --wait on the long tool itself: its own result, as if it had finished within the call.
    own = cli(ws, "bisect_commits", "--args-json", json.dumps(bisect_args(history)), "--wait", "300")
    assert own["structured"]["status"] == "succeeded"
    assert own["structured"]["first_bad_commit"]["hash"] == history.bug_commit


def test_polls_are_not_evidence_and_a_result_is_evidence_once(history: History) -> None:
    ws = history.path
    inv = cli(ws, "start_investigation", "--arg", "symptom=the run fails since the last commits")
    iid = inv["structured"]["investigation_id"]
    # Started with the investigation: the job records its result itself; polls add nothing.
    job = cli(
        ws,
        "bisect_commits",
        "--args-json",
        json.dumps(bisect_args(history, investigation_id=iid)),
        "--wait",
        "0",
    )
    job_id = job["structured"]["job_id"]
    polls = [cli(ws, "get_job", "--args-json", json.dumps({"job_id": job_id, "investigation_id": iid}))]
    final = cli(
        ws, "get_job", "--args-json", json.dumps({"job_id": job_id, "investigation_id": iid, "wait_s": 300})
    )
    assert final["structured"]["status"] == "succeeded"
    again = cli(ws, "get_job", "--args-json", json.dumps({"job_id": job_id, "investigation_id": iid}))
    evidence = cli(ws, "get_investigation", "--arg", f"investigation_id={iid}")["structured"][
        "investigation"
    ]["evidence"]
    assert [e["source"] for e in evidence] == ["bisect_commits"]
    assert final["structured"]["evidence_id"] == again["structured"]["evidence_id"] == evidence[0]["id"]
    assert all(
        p["structured"].get("evidence_id") is None for p in polls if p["structured"]["status"] == "running"
    )


def test_a_job_started_without_an_investigation_is_kept_once_by_get_job(history: History) -> None:
    ws = history.path
    job = cli(ws, "bisect_commits", "--args-json", json.dumps(bisect_args(history)), "--wait", "300")
    job_id = job["structured"]["job_id"]
    iid = cli(ws, "start_investigation", "--arg", "symptom=the run fails since the last commits")[
        "structured"
    ]["investigation_id"]
    first = cli(ws, "get_job", "--args-json", json.dumps({"job_id": job_id, "investigation_id": iid}))
    second = cli(ws, "get_job", "--args-json", json.dumps({"job_id": job_id, "investigation_id": iid}))
    evidence = cli(ws, "get_investigation", "--arg", f"investigation_id={iid}")["structured"][
        "investigation"
    ]["evidence"]
    assert [e["source"] for e in evidence] == ["bisect_commits"]  # the tool's own result, recorded once
    assert first["structured"]["evidence_id"] == second["structured"]["evidence_id"] == evidence[0]["id"]

"""Protocol calls that run the reproducer answer within the client's timeout (issue 18.5): with a
reproducer slower than TRAINSLEUTH_CALL_WAIT_S, submit_diagnosis and verify_fix hand back a job id
through the one long-running mechanism; get_job later returns what the direct call returns on a twin
workspace whose server waits long enough, and the investigation ends in the same state. Two
verify_fix jobs on one investigation never run side by side."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from test_protocol_helpers import TRAINSLEUTH, Driver, TerminalPerson, make_repo, server_with_person, text_of

pytestmark = pytest.mark.anyio

SLOW = 3  # seconds the reproducer sleeps; the job-path server waits only 1 s
REPRO = f"sleep {SLOW}; grep -q '^lr = 1$' train.py"


def _params(ws: Path, wait_s: float) -> StdioServerParameters:
    return StdioServerParameters(
        command=TRAINSLEUTH,
        args=["serve", "--workspace", str(ws)],
        cwd=str(ws),
        env={**os.environ, "TRAINSLEUTH_CALL_WAIT_S": str(wait_s)},
    )


_IDS = re.compile(r"\b(inv|ev|diag|hyp|att|attempt|job)-[0-9a-z]+\b")
_TIMES = re.compile(r"\d{4}-\d\d-\d\dT[0-9:.+Z-]+")
_VOLATILE = {"created_at", "finished_at", "duration_s", "started_at", "at", "pid", "channel", "elapsed_s"}


def _normal(value: Any, ws: Path) -> Any:
    """A result with what legitimately differs between two runs (ids, times, paths) masked."""
    if isinstance(value, dict):
        return {k: "<v>" if k in _VOLATILE else _normal(v, ws) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v, ws) for v in value]
    if isinstance(value, str):
        value = value.replace(str(ws), "<ws>").replace(os.path.realpath(ws), "<ws>")
        return _TIMES.sub("<t>", _IDS.sub(r"\1-<id>", value))
    if isinstance(value, float):
        return "<float>"  # durations of the reproducer's runs
    return value


async def _through_job(d: Driver, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Call a long tool on the job-path server: it must hand back a job; get_job finishes it."""
    first = await d.c.call_tool(name, args)
    assert not first.is_error, text_of(first)
    job = first.structured_content
    assert job is not None and job["status"] == "running" and job["kind"] == name, job
    assert f"get_job(job_id='{job['job_id']}'" in text_of(first)
    for _ in range(10):
        got = await d.ok("get_job", {"job_id": job["job_id"], "wait_s": 20})
        if got["status"] != "running":
            break
    assert got["status"] == "succeeded", got
    again = await d.ok("get_job", {"job_id": job["job_id"]})
    assert again["result"] == got["result"]  # the finish step ran once: every fetch shows the same
    return dict(got["result"])


async def _walk(ws: Path, wait_s: float) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Quick pathway to a verified fix; returns the diagnosis, the verification and the final state."""
    jobs = wait_s < SLOW
    async with Client(_params(ws, wait_s)) as c:
        d = Driver(c, TerminalPerson(ws))
        iid = await d.start(reproducer=REPRO, pathway="quick")
        ev = await d.evidence(iid)
        diag_args = d.diagnosis(iid, ev)
        diag = await (
            _through_job(d, "submit_diagnosis", diag_args) if jobs else d.ok("submit_diagnosis", diag_args)
        )
        await d.approve(iid)
        await d.ok("begin_fix", {"investigation_id": iid, "description": "lr back to 1"})
        (ws / "train.py").write_text("lr = 1\n")
        verify = {"investigation_id": iid}
        if jobs:
            started = await c.call_tool("verify_fix", verify)
            job_id = started.structured_content["job_id"]  # type: ignore[index]
            # While it runs: a second verify_fix is refused naming the job, and every next step
            # (of a refused protocol call too) says to fetch its result first.
            second = await d.refused("verify_fix", verify, job_id, "one at a time")
            assert f"get_job(job_id={job_id!r}" in second
            state = await d.ok("get_investigation", {"investigation_id": iid})
            assert job_id in state["investigation"]["next_step"], state["investigation"]["next_step"]
            refused = await d.refused("begin_fix", {"investigation_id": iid, "description": "another"})
            assert job_id in refused
            for _ in range(10):
                got = await d.ok("get_job", {"job_id": job_id, "wait_s": 20})
                if got["status"] != "running":
                    break
            assert got["status"] == "succeeded", got
            result = dict(got["result"])
        else:
            result = await d.ok("verify_fix", verify)
        final = await d.get(iid)
        return diag, result, final


async def test_slow_reproducer_runs_as_jobs_with_the_direct_outcome(tmp_path: Path) -> None:
    files = {"train.py": "lr = 10\n"}
    direct_ws = make_repo(tmp_path / "direct", files)
    job_ws = make_repo(tmp_path / "job", files)

    d_diag, d_verify, d_final = await _walk(direct_ws, wait_s=40)
    j_diag, j_verify, j_final = await _walk(job_ws, wait_s=1)

    # A direct answer also names the job it ran as; get_job's result is the tool's own result.
    for direct in (d_diag, d_verify):
        assert direct.pop("status") == "succeeded" and direct.pop("job_id").startswith("job-")
    assert d_diag["diagnosis"]["reproduction"]["exit_code"] == 1  # it failed first, after sleeping
    assert _normal(j_diag, job_ws) == _normal(d_diag, direct_ws)
    assert j_verify["passed"] and j_verify["phase"] == "resolved"
    assert _normal(j_verify, job_ws) == _normal(d_verify, direct_ws)
    # The protocol state is the same: phase, one attempt that passed, the same timeline of events.
    assert j_final["phase"] == d_final["phase"] == "resolved"
    assert (
        [a["status"] for a in j_final["attempts"]] == [a["status"] for a in d_final["attempts"]] == ["passed"]
    )
    # (less the refusal of the begin_fix the job walk tried while verify_fix ran)
    kinds = [e["kind"] for e in j_final["timeline"]]
    assert kinds.count("refused") == 1
    assert [k for k in kinds if k != "refused"] == [e["kind"] for e in d_final["timeline"]]


async def _direct_and_job(ws: Path, name: str, args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same call on a server that waits (direct answer) and on one that waits 0 s (a job id)."""
    async with Client(_params(ws, 40)) as c:
        direct = await Driver(c).ok(name, args)
    assert direct.pop("status") == "succeeded" and direct.pop("job_id").startswith("job-")
    async with Client(_params(ws, 0)) as c:
        fetched = await _through_job(Driver(c), name, args)
    return direct, fetched


async def test_environment_report_and_diff_checkpoints_hand_back_jobs(tmp_path: Path) -> None:
    import torch

    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 1\n"})
    torch.save({"w": torch.ones(3), "b": torch.zeros(2)}, ws / "a.pt")
    torch.save({"module.w": torch.ones(3), "b": torch.ones(2)}, ws / "b.pt")

    direct, fetched = await _direct_and_job(ws, "environment_report", {"import_torch": False})
    assert fetched == direct and fetched["environments"], fetched

    direct, fetched = await _direct_and_job(ws, "diff_checkpoints", {"a": "a.pt", "b": "b.pt"})
    assert _normal(fetched, ws) == _normal(direct, ws)
    assert fetched["identical"] is False and fetched["n_tensors_a"] == fetched["n_tensors_b"] == 2, fetched


async def test_two_servers_verifying_at_once_through_jobs_do_not_race(tmp_path: Path) -> None:
    """Two servers on one workspace, both answering with job ids at once (wait 0): the second
    verify_fix is refused naming the first one's job, or its job finds the verification already
    under way; exactly one attempt passes and nothing is reverted."""
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    async with Client(_params(ws, 40)) as c:
        d = Driver(c, TerminalPerson(ws))
        iid = await d.start(reproducer=REPRO, pathway="quick")
        await d.approved(iid)
        await d.ok("begin_fix", {"investigation_id": iid, "description": "lr back to 1"})
    (ws / "train.py").write_text("lr = 1\n")
    answers: list[tuple[bool, str, dict[str, Any]]] = []
    async with Client(_params(ws, 0)) as one, Client(_params(ws, 0)) as two:

        async def verify(client: Client, revert: bool) -> None:
            r = await client.call_tool("verify_fix", {"investigation_id": iid, "revert": revert})
            answers.append((bool(r.is_error), text_of(r), r.structured_content or {}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(verify, one, False)
            tg.start_soon(verify, two, True)
        outcomes = []
        for failed, text, job in answers:
            if failed:
                assert "still running as job" in text, text
                outcomes.append("refused")
                continue
            got: dict[str, Any] = {}
            for _ in range(10):
                fetched = await one.call_tool("get_job", {"job_id": job["job_id"], "wait_s": 20})
                got = fetched.structured_content or {}
                if got.get("status") != "running":
                    break
            if got.get("status") == "succeeded":
                outcomes.append("passed" if got["result"]["passed"] else "failed")
            else:
                assert "already running" in text_of(fetched) or "no active fix attempt" in text_of(fetched)
                outcomes.append("refused")
        assert sorted(outcomes) == ["passed", "refused"], answers
    async with Client(_params(ws, 40)) as c:
        final = await Driver(c).get(iid)
    assert final["phase"] == "resolved" and [a["status"] for a in final["attempts"]] == ["passed"]
    assert (ws / "train.py").read_text() == "lr = 1\n"


async def test_the_person_sees_the_code_when_the_job_result_is_delivered(tmp_path: Path) -> None:
    """A client without dialogs: the person is shown the diagnosis and its one-time code by the server
    that delivers the job's result (the job process has no channel to the person), exactly once."""
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, person = server_with_person(ws, call_wait_s=0.0)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer=REPRO, pathway="quick")
        ev = await d.evidence(iid)
        started = await c.call_tool("submit_diagnosis", d.diagnosis(iid, ev))
        job = started.structured_content or {}
        assert job.get("status") == "running", text_of(started)
        assert not person.seen  # nothing shown while the reproducer runs
        got: dict[str, Any] = {}
        for _ in range(10):
            got = await d.ok("get_job", {"job_id": job["job_id"], "wait_s": 20})
            if got["status"] != "running":
                break
        assert got["status"] == "succeeded" and got["result"]["diagnosis"]["status"] == "awaiting_approval", (
            got
        )
        assert got["result"]["approval_note"] and len(person.seen) == 1
        assert "One-time code" not in json.dumps(got)  # the code reaches the person only
        await d.ok("get_job", {"job_id": job["job_id"]})
        assert len(person.seen) == 1  # fetched again: not shown again
        approved = await d.approve(iid)
        assert approved["phase"] in ("approved", "fixing")  # approval may open the fix attempt at once

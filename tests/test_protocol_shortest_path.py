"""Issue 22.3 and 22.2: the shortest honest path. Analysis results become evidence of the open investigation by
themselves (short ids); a bisect plus a finding settle the question without hypothesis ceremony; next steps
match the state; a last-good version is a known change to blame. Real tools, real git, in-memory MCP."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from mcp import Client
from test_protocol_helpers import Driver, git, make_repo, server_with_person, text_of

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[1]
REPRO = "grep -q '^lr = 1$' train.py"


def _history(tmp_path: Path) -> Path:
    """Three commits; the third raises the learning rate (the bad one); the demo's NaN log is in it."""
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 1\n", "README.md": "x\n"})
    (ws / "README.md").write_text("y\n")
    git(ws, "commit", "-qam", "docs")
    (ws / "train.py").write_text("lr = 10\n")
    git(ws, "commit", "-qam", "raise the learning rate")
    shutil.copy2(REPO / "examples" / "demo" / "train.log", ws / "train.log")
    git(ws, "add", "train.log")
    git(ws, "commit", "-qm", "the failing run's log")
    return ws


async def test_results_become_evidence_and_a_bisect_with_a_finding_settles_it(tmp_path: Path) -> None:
    ws = _history(tmp_path)
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        # No known change: the full pathway.
        started = await d.ok("start_investigation", {"symptom": "the loss turns NaN", "reproducer": REPRO})
        iid = started["investigation_id"]
        assert started["pathway"] == "full"
        # Diagnostic calls without investigation_id: their results are recorded on the open investigation.
        log = await c.call_tool("analyze_training_log", {"path": "train.log"})
        assert not log.is_error and "stored as evidence e1 on the open investigation" in text_of(log)
        bisect = await d.ok(
            "bisect_commits",
            {"repo": str(ws), "good": "HEAD~3", "bad": "HEAD", "command": REPRO},
        )
        assert bisect["status"] == "succeeded" and bisect["evidence_id"] == "e2"
        inv = await d.get(iid)
        assert [e["id"] for e in inv["evidence"]] == ["e1", "e2"]
        assert [e["source"] for e in inv["evidence"]] == ["analyze_training_log", "bisect_commits"]
        # The bisect and the log's finding settle it: no hypotheses asked for.
        out = await d.ok(
            "submit_diagnosis", d.diagnosis(iid, "E2", evidence_ids=["E2", "e1"])
        )  # ids are not case-sensitive
        assert out["diagnosis"]["settled_by"] == ["e2", "e1"] and out["diagnosis"]["evidence_ids"] == [
            "e2",
            "e1",
        ]
        await d.approve(iid)
        await d.ok("begin_fix", {"investigation_id": iid, "description": "lr back to 1"})
        (ws / "train.py").write_text("lr = 1\n")
        assert (await d.ok("verify_fix", {"investigation_id": iid}))["passed"]
        text = text_of(await c.call_tool("get_investigation", {"investigation_id": iid}))
        assert "settled by evidence e2, e1 (bisect + finding)" in text


async def test_a_finding_alone_does_not_skip_the_hypotheses(tmp_path: Path) -> None:
    ws = _history(tmp_path)
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = (await d.ok("start_investigation", {"symptom": "the loss turns NaN", "reproducer": REPRO}))[
            "investigation_id"
        ]
        log = await d.ok("analyze_training_log", {"path": "train.log"})
        await d.refused(
            "submit_diagnosis", d.diagnosis(iid, log["evidence_id"]), "confirmed hypothesis", "bisect"
        )
        # Two open investigations: a result is not attached to either by guesswork.
        await d.ok("start_investigation", {"symptom": "eval accuracy stuck at chance"})
        again = await c.call_tool("analyze_training_log", {"path": "train.log"})
        assert "not stored as evidence: 2 investigations are open" in text_of(again)


async def test_a_localised_error_found_by_running_the_code_settles_it(tmp_path: Path) -> None:
    """A runtime-only bug (no history to bisect): the probe ran the user's code and named the module and
    parameters at error severity. That experiment already tested the cause, so the full pathway asks
    for no hypothesis rounds. The assistant's own record_evidence, a warning, or a finding with no place
    never settle it."""
    ws = make_repo(
        tmp_path / "ws",
        {
            "train.py": "lr = 10\n",
            "model.py": (REPO / "examples" / "probe" / "broken_not_in_optimizer.py").read_text(),
        },
    )
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = (
            await d.ok("start_investigation", {"symptom": "accuracy stays at chance", "reproducer": REPRO})
        )["investigation_id"]
        forged = await d.ok(
            "record_evidence",
            {
                "investigation_id": iid,
                "summary": "the probe said so",
                "data": {
                    "findings": [{"code": "params_not_updated", "severity": "error", "module": "backbone"}]
                },
            },
        )
        await d.refused("submit_diagnosis", d.diagnosis(iid, forged["evidence_id"]), "confirmed hypothesis")
        probe = await d.ok("probe_gradients", {"entrypoint": "model.py:broken", "steps": 3})
        assert any(f["code"] == "params_not_updated" and f["severity"] == "error" for f in probe["findings"])
        out = await d.ok(
            "submit_diagnosis",
            d.diagnosis(
                iid, probe["evidence_id"], evidence_ids=[forged["evidence_id"], probe["evidence_id"]]
            ),
        )
        assert out["diagnosis"]["settled_by"] == [probe["evidence_id"]]
        text = text_of(await c.call_tool("get_investigation", {"investigation_id": iid}))
        assert "(an error found by running the code, localised)" in text


def test_which_runtime_results_settle() -> None:
    from trainsleuth.protocol.gate4 import _localised_runtime_finding

    error = {"code": "resume_not_restored", "severity": "error", "module": "LR scheduler step"}
    assert _localised_runtime_finding("check_resume", {"findings": [error]})
    assert _localised_runtime_finding("check_resume", {"result": {"findings": [error]}})  # a job's result
    params = {"code": "loss_broadcast", "severity": "error", "evidence": {"params": ["head.weight"]}}
    assert _localised_runtime_finding("probe_gradients", {"findings": [params]})
    assert not _localised_runtime_finding("record_evidence", {"findings": [error]})
    assert not _localised_runtime_finding("analyze_training_log", {"findings": [error]})
    assert not _localised_runtime_finding("check_resume", {"findings": [{**error, "severity": "warning"}]})
    assert not _localised_runtime_finding("check_resume", {"findings": [{**error, "module": None}]})


async def test_next_steps_follow_the_state(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer=REPRO, pathway="full")
        ev = await d.evidence(iid)
        hyps = [{"statement": f"cause {i}", "confirm_if": "y", "rule_out_if": "n"} for i in range(3)]
        out = await d.ok("propose_hypotheses", {"investigation_id": iid, "hypotheses": hyps})
        first, second, _ = (h["id"] for h in out["hypotheses"])
        assert out["next_step"].startswith(f"test hypothesis {first}")
        r = await d.ok(
            "resolve_hypothesis",
            {"investigation_id": iid, "hypothesis_id": first, "outcome": "ruled_out", "evidence_ids": [ev]},
        )
        assert r["next_step"].startswith(f"test hypothesis {second}")
        r = await d.ok(
            "resolve_hypothesis",
            {"investigation_id": iid, "hypothesis_id": second, "outcome": "confirmed", "evidence_ids": [ev]},
        )
        # Once one is confirmed, nobody is asked to test a hypothesis any more.
        assert r["next_step"].startswith(f"submit_diagnosis resting on the confirmed hypothesis {second}")
        assert "test hypothesis" not in r["next_step"]
        inv = await d.get(iid)
        assert [h["status"] for h in inv["hypotheses"]] == ["ruled_out", "confirmed", "superseded"]
        await d.ok("submit_diagnosis", d.diagnosis(iid, ev, confidence=0.6))
        rev = await d.ok(
            "record_review",
            {"investigation_id": iid, "verdict": "CHALLENGED", "reviewer": "r", "reasoning": "weak"},
        )
        assert "sent back by the review" in rev["next_step"]


async def test_a_last_good_version_is_a_change_to_blame(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, _ = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c)
        out = await d.ok(
            "start_investigation",
            {
                "symptom": "accuracy dropped after the upgrade",
                "reproducible": "always",
                "last_good": "v1.4.2",
            },
        )
        assert out["pathway"] == "quick" and "v1.4.2" in out["pathway_reason"]
        out = await d.ok(
            "start_investigation",
            {
                "symptom": "eval loss doubled",
                "reproducible": "always",
                "started_when": "since commit 3f2a9c1",
            },
        )
        assert out["pathway"] == "quick"
        out = await d.ok("start_investigation", {"symptom": "grad norm explodes", "reproducible": "always"})
        assert out["pathway"] == "full" and "last_good" in out["pathway_reason"]

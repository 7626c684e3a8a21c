"""`next_step` and the gates never disagree (issue 27.3): every next step the state can give is reached, and
the step it names is taken and accepted.

The keys come from the code (`protocol.next_steps.NEXT_STEPS`); each walk below reads the next step the server
answers (get_investigation), checks it is the one the state gives for that key, takes exactly the step it
names, and asserts the gate accepted it. The walks run on a real in-memory server with real git
repositories, the real reproducer runs, a real bisect job and a real log reading; the person approves
through the one-time code the server shows on its own channel. One test runs every walk and then checks
that every key was reached. Escalation by working time is driven by a clock moved forward on the same
sealed state.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from test_protocol_helpers import Driver, git, make_repo, server_with_person

from trainsleuth.protocol.core import QUICK_PATH_LIMIT_S
from trainsleuth.protocol.machine import Protocol
from trainsleuth.protocol.next_steps import NEXT_STEPS
from trainsleuth.state.store import Store, default_state_path
from trainsleuth.tools.bisect.testing import make_history

pytestmark = pytest.mark.anyio

REPRO = "grep -q '^lr = 1$' train.py"
HYPS = [
    {
        "statement": f"cause {i}",
        "confirm_if": f"sees {i}",
        "rule_out_if": f"the loss stays finite without {i}",
    }
    for i in range(1, 4)
]


class Walk:
    """A Driver that checks, at each step, that the server's next step is the state's (and records its key)."""

    def __init__(self, d: Driver, ws: Path, reached: set[str]) -> None:
        self.d = d
        self.ws = ws
        self.reached = reached

    def protocol(self, **kw: Any) -> Protocol:
        return Protocol(Store(default_state_path(self.ws), workspace=self.ws), **kw)

    async def next(self, iid: str, key: str) -> str:
        shown = (await self.d.get(iid))["next_step"]
        got_key, text = self.protocol().next_move_of(iid)
        assert (got_key, text) == (key, shown), (got_key, key, shown)
        self.reached.add(key)
        return str(shown)

    async def submit(self, iid: str, evidence: list[str], **kw: Any) -> dict[str, Any]:
        args = self.d.diagnosis(iid, evidence[0], evidence_ids=evidence, **kw)
        return await self.d.ok("submit_diagnosis", args)


async def walk_quick_pathway_from_evidence_to_closed(tmp_path: Path, reached: set[str]) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        w = Walk(Driver(c, person), ws, reached)
        iid = await w.d.start(reproducer=REPRO)
        assert "submit_diagnosis" in await w.next(iid, "investigate_quick")
        ev = await w.d.evidence(iid)
        await w.submit(iid, [ev])
        assert "approve_diagnosis" in await w.next(iid, "approve")
        await w.d.approve(iid)
        assert "verify_fix" in await w.next(iid, "fix")
        (ws / "train.py").write_text("lr = 1\n")
        assert (await w.d.ok("verify_fix", {"investigation_id": iid}))["passed"]
        assert "capture_knowledge" in await w.next(iid, "capture")
        await w.d.ok("capture_knowledge", {"investigation_id": iid, "lessons": ["lr 10 diverges"]})
        await w.next(iid, "closed")


async def walk_full_pathway_hypotheses_review_and_resubmission(tmp_path: Path, reached: set[str]) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        w = Walk(Driver(c, person), ws, reached)
        iid = await w.d.start(reproducer=REPRO, pathway="full")
        assert "propose_hypotheses" in await w.next(iid, "investigate_full")
        ev = await w.d.evidence(iid)
        out = await w.d.ok("propose_hypotheses", {"investigation_id": iid, "hypotheses": HYPS})
        for h in out["hypotheses"]:  # every one ruled out, one at a time
            assert h["id"] in await w.next(iid, "test_hypothesis")
            await w.d.ok(
                "resolve_hypothesis",
                {
                    "investigation_id": iid,
                    "hypothesis_id": h["id"],
                    "outcome": "ruled_out",
                    "evidence_ids": [ev],
                },
            )
        assert "propose_hypotheses" in await w.next(iid, "new_round")
        out = await w.d.ok("propose_hypotheses", {"investigation_id": iid, "hypotheses": HYPS})
        first = out["under_test"]
        await w.next(iid, "test_hypothesis")
        await w.d.ok(
            "resolve_hypothesis",
            {"investigation_id": iid, "hypothesis_id": first, "outcome": "confirmed", "evidence_ids": [ev]},
        )
        assert "rule_out_if" in await w.next(iid, "submit_confirmed")
        # The step as named: no disproving observation of its own; the hypothesis' rule_out_if stands in.
        low = await w.submit(iid, [ev], confidence=0.5, disproving_observation="")
        assert low["diagnosis"]["disproving_observation"] == HYPS[0]["rule_out_if"]
        assert low["diagnosis"]["disproof_from"] == first
        assert "record_review" in await w.next(iid, "review")
        review = {"investigation_id": iid, "verdict": "CHALLENGED", "reviewer": "r", "reasoning": "thin"}
        await w.d.ok("record_review", review)
        assert "submit_diagnosis again" in await w.next(iid, "resubmit")
        await w.submit(iid, [ev], disproving_observation="")
        await w.next(iid, "approve")


async def walk_failed_quick_fix_hypotheses_then_strikes(tmp_path: Path, reached: set[str]) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n", "notes.txt": "n\n"})
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        w = Walk(Driver(c, person), ws, reached)
        iid = await w.d.start(reproducer=REPRO)
        ev = await w.d.evidence(iid)
        await w.submit(iid, [ev])
        await w.d.approve(iid)
        await w.next(iid, "fix")
        (ws / "train.py").write_text("lr = 5\n")
        failed = await w.d.ok("verify_fix", {"investigation_id": iid, "revert": True})
        assert not failed["passed"]
        # The failed fix escalated the quick pathway: begin_fix needs hypotheses, and the next step says so.
        assert "propose_hypotheses" in await w.next(iid, "hypotheses_before_fix")
        await w.d.ok("propose_hypotheses", {"investigation_id": iid, "hypotheses": HYPS})
        assert "begin_fix" in await w.next(iid, "begin_fix")
        await w.d.ok("begin_fix", {"investigation_id": iid, "description": "lr back to 1"})
        # A pass with a file outside the approved fix: undo it, as the next step says, and verify again.
        (ws / "train.py").write_text("lr = 1\n")
        (ws / "notes.txt").write_text("changed\n")
        pending = await w.d.ok("verify_fix", {"investigation_id": iid})
        assert not pending["passed"]
        assert "notes.txt" in await w.next(iid, "undo_or_amend")
        git(ws, "checkout", "--", "notes.txt")
        assert (await w.d.ok("verify_fix", {"investigation_id": iid}))["passed"]

    # Three strikes on another workspace's problem: halted, and the named step (new hypotheses) is accepted.
    ws2 = make_repo(tmp_path / "ws2", {"train.py": "lr = 10\n"})
    server, _, person = server_with_person(ws2)
    async with Client(server) as c:
        w = Walk(Driver(c, person), ws2, reached)
        iid = await w.d.start(reproducer=REPRO)
        ev = await w.d.evidence(iid)
        await w.submit(iid, [ev])
        await w.d.approve(iid)
        for n, lr in enumerate(("5", "4", "3")):
            if n == 1:
                await w.next(iid, "hypotheses_before_fix")
                await w.d.ok("propose_hypotheses", {"investigation_id": iid, "hypotheses": HYPS})
            if n:
                await w.next(iid, "begin_fix")
                await w.d.ok("begin_fix", {"investigation_id": iid, "description": f"lr {lr}"})
            (ws2 / "train.py").write_text(f"lr = {lr}\n")
            await w.d.ok("verify_fix", {"investigation_id": iid, "revert": True})
        assert "propose_hypotheses" in await w.next(iid, "halted")
        await w.d.ok("propose_hypotheses", {"investigation_id": iid, "hypotheses": HYPS})


async def walk_escalated_by_working_time_then_bisect_and_finding(tmp_path: Path, reached: set[str]) -> None:
    """The issue's case: after escalating, next_step says a bisect plus a finding may go straight to
    submit_diagnosis; the gate must accept exactly that."""
    history = make_history(tmp_path / "ws", 6, 3)
    ws = history.path
    scratch = ws / ".trainsleuth" / "scratch"
    scratch.mkdir(parents=True)
    (scratch / "train.log").write_text(
        "".join(f'{{"step": {i}, "loss": {v}}}\n' for i, v in enumerate(["2.0", "1.9", "NaN", "NaN"]))
    )
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        w = Walk(Driver(c, person), ws, reached)
        iid = await w.d.start(
            symptom="the run fails since the last commits", reproducer="test ! -f bug",
            what_changed="the last five commits",
        )  # fmt: skip
        await w.next(iid, "investigate_quick")
        # Sixteen minutes of the assistant's own work pass (no waits recorded): the quick pathway escalates.
        later = w.protocol(clock=lambda: time.time() + QUICK_PATH_LIMIT_S + 60)
        assert later.get(iid).pathway == "full"
        assert "bisect" in await w.next(iid, "investigate_full")
        log = await w.d.ok(
            "analyze_training_log", {"investigation_id": iid, "path": ".trainsleuth/scratch/train.log"}
        )
        bisect = await w.d.ok(
            "bisect_commits",
            {
                "investigation_id": iid,
                "repo": ".",
                "good": history.good,
                "bad": "main",
                "command": "test ! -f bug",
            },
        )
        assert bisect["first_bad_commit"]["hash"] == history.bug_commit
        cited = [bisect["evidence_id"], log["evidence_id"]]
        out = await w.submit(iid, cited, proposed_fix={"files": ["bug"], "change": "remove the bug file"})
        assert out["diagnosis"]["settled_by"] == cited
        # The person rejects it (saying no needs no proof): the next step, on the full pathway with no
        # confirmed hypothesis, names what a resubmission must cite; the gate accepts it.
        await w.d.ok(
            "approve_diagnosis", {"investigation_id": iid, "decision": "reject", "words": "look again"}
        )
        assert "bisect" in await w.next(iid, "resubmit_or_hypotheses")
        await w.submit(iid, cited, proposed_fix={"files": ["bug"], "change": "remove the bug file"})
        await w.next(iid, "approve")


async def test_while_a_diagnosis_runs_as_a_job_the_next_step_is_get_job(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, person = server_with_person(ws, call_wait_s=0.5)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer=REPRO)
        ev = await d.evidence(iid)
        slow = d.diagnosis(iid, ev, reproducer=f"sleep 4; {REPRO}")
        job = await d.ok("submit_diagnosis", slow)
        assert job["status"] == "running"
        shown = (await d.get(iid))["next_step"]
        assert shown.startswith("wait for submit_diagnosis") and job["job_id"] in shown
        got: dict[str, Any] = {"status": "running"}
        while got["status"] == "running":
            got = await d.ok("get_job", {"job_id": job["job_id"], "wait_s": 40})
        assert got["status"] == "succeeded" and (await d.get(iid))["next_step"] == NEXT_STEPS["approve"]


@pytest.mark.slow
async def test_every_next_step_is_accepted_by_its_gate(tmp_path: Path) -> None:
    reached: set[str] = set()
    await walk_quick_pathway_from_evidence_to_closed(tmp_path / "quick", reached)
    await walk_full_pathway_hypotheses_review_and_resubmission(tmp_path / "full", reached)
    await walk_failed_quick_fix_hypotheses_then_strikes(tmp_path / "failed", reached)
    await walk_escalated_by_working_time_then_bisect_and_finding(tmp_path / "escalated", reached)
    assert set(NEXT_STEPS) == reached, sorted(set(NEXT_STEPS) - reached)

"""An adversarial assistant tries to skip each gate in turn; every attempt is an isError result naming the
missing step, changes nothing, and is written to the audit trail. Also the edit gate used by the hooks."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from mcp import Client
from test_protocol_helpers import Driver, make_repo, server_with_person

from trainsleuth.protocol.gate import edit_gate_status
from trainsleuth.state.store import default_state_path

pytestmark = pytest.mark.anyio

REPRO = "grep -q '^lr = 1$' train.py"


async def test_adversary_tries_to_skip_every_gate(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer=REPRO, pathway="full")
        other = await d.start(symptom="another problem")
        other_ev = await d.evidence(other, "belongs to the other investigation")
        fix = {"investigation_id": iid, "description": "just change it"}

        async def phase() -> str:
            return str((await d.get(iid))["phase"])

        # Phase investigating: nothing past Gate 4 is reachable.
        await d.refused("begin_fix", fix, "no approved diagnosis", "submit_diagnosis")
        await d.refused("verify_fix", {"investigation_id": iid}, "no active fix attempt", "begin_fix")
        await d.refused(
            "approve_diagnosis",
            {"investigation_id": iid, "approver": "me", "words": "ok"},
            "submit_diagnosis",
        )
        await d.refused(
            "record_review",
            {"investigation_id": iid, "verdict": "CONFIRMED", "reviewer": "me", "reasoning": "fine"},
            "submit_diagnosis",
        )
        await d.refused("capture_knowledge", {"investigation_id": iid, "no_new_knowledge": True,
                                              "no_knowledge_reason": "x"}, "verify_fix")  # fmt: skip
        # Gate 4 without evidence, with invented evidence, with another investigation's evidence.
        await d.refused(
            "submit_diagnosis", d.diagnosis(iid, "x", evidence_ids=[]), "cites no evidence id", "evidence_ids"
        )
        # Everything a diagnosis lacks is named in one refusal, not one field per call.
        bare = {"investigation_id": iid, "symptom": "s", "root_cause": "r", "mechanism": "m",
                "proposed_fix": {"change": "c"}, "confidence": 0.9}  # fmt: skip
        await d.refused(
            "submit_diagnosis", bare, "evidence_ids", "disproving_observation", "proposed_fix.files"
        )
        await d.refused("submit_diagnosis", d.diagnosis(iid, "ev-invented"), "does not exist", "ev-invented")
        await d.refused("submit_diagnosis", d.diagnosis(iid, other_ev), "does not exist", other_ev)
        ev = await d.evidence(iid)
        await d.refused(
            "submit_diagnosis",
            d.diagnosis(iid, ev, disproving_observation="   "),
            "would disprove",
            "disproving_observation",
        )
        # Full pathway: a diagnosis needs a confirmed hypothesis, tested one at a time.
        await d.refused(
            "submit_diagnosis", d.diagnosis(iid, ev), "confirmed hypothesis", "propose_hypotheses"
        )
        two = [{"statement": "a", "confirm_if": "b", "rule_out_if": "c"}] * 2
        await d.refused("propose_hypotheses", {"investigation_id": iid, "hypotheses": two}, "at least 3")
        await d.refused("propose_hypotheses", {"investigation_id": iid, "hypotheses": two * 3}, "at most 5")
        blank = [{"statement": "a", "confirm_if": "", "rule_out_if": "c"}] * 3
        await d.refused("propose_hypotheses", {"investigation_id": iid, "hypotheses": blank}, "confirm_if")
        hyps = [{"statement": f"h{i}", "confirm_if": "y", "rule_out_if": "n"} for i in range(3)]
        out = await d.ok("propose_hypotheses", {"investigation_id": iid, "hypotheses": hyps})
        h1, h2, _ = (h["id"] for h in out["hypotheses"])
        await d.refused(
            "resolve_hypothesis",
            {"investigation_id": iid, "hypothesis_id": h2, "outcome": "confirmed", "evidence_ids": [ev]},
            "one hypothesis at a time", h1,
        )  # fmt: skip
        await d.refused(
            "resolve_hypothesis",
            {"investigation_id": iid, "hypothesis_id": h1, "outcome": "confirmed", "evidence_ids": []},
            "evidence_ids",
        )
        await d.ok(
            "resolve_hypothesis",
            {"investigation_id": iid, "hypothesis_id": h1, "outcome": "ruled_out", "evidence_ids": [ev]},
        )
        await d.refused(
            "submit_diagnosis", d.diagnosis(iid, ev, hypothesis_id=h1), "not a confirmed hypothesis"
        )
        await d.ok(
            "resolve_hypothesis",
            {"investigation_id": iid, "hypothesis_id": h2, "outcome": "confirmed", "evidence_ids": [ev]},
        )
        assert await phase() == "hypotheses"

        # Low confidence: no approval and no fix until a CONFIRMED review.
        await d.ok("submit_diagnosis", d.diagnosis(iid, ev, confidence=0.5))
        await d.refused(
            "approve_diagnosis", {"investigation_id": iid, "approver": "me", "words": "ok"}, "record_review"
        )
        await d.refused("begin_fix", fix, "record_review")
        await d.ok(
            "record_review",
            {
                "investigation_id": iid,
                "verdict": "INSUFFICIENT_EVIDENCE",
                "reviewer": "r",
                "reasoning": "thin",
            },
        )
        assert await phase() == "hypotheses"
        await d.refused(
            "approve_diagnosis",
            {"investigation_id": iid, "approver": "me", "words": "ok"},
            "submit_diagnosis",
        )

        # Awaiting approval: still no fix, and no edits.
        await d.ok("submit_diagnosis", d.diagnosis(iid, ev, confidence=0.85))
        await d.refused("begin_fix", fix, "approve_diagnosis")
        assert not edit_gate_status(ws).allowed
        # Approver and words alone are no proof that a person approved.
        await d.refused(
            "approve_diagnosis", {"investigation_id": iid, "approver": "Ann", "words": "go"}, "one-time code"
        )
        await d.refused("approve_diagnosis", {"investigation_id": iid, "code": "0000-0000"}, "wrong")
        await d.approve(iid)
        assert await phase() == "fixing"  # the approval begins the first attempt
        await d.refused("capture_knowledge", {"investigation_id": iid, "lessons": ["x"]}, "verify_fix")
        await d.refused("approve_diagnosis", {"investigation_id": iid, "code": person.code()}, "verify_fix")

        # Fixing: one attempt at a time; no moving the goalposts mid-attempt. begin_fix on the attempt the
        # approval began only names it.
        named = await d.ok("begin_fix", fix)
        assert named["attempt"]["description"] == fix["description"]
        await d.refused("begin_fix", fix, "already active", "verify_fix")
        await d.refused("submit_diagnosis", d.diagnosis(iid, ev), "verify_fix")
        await d.refused("propose_hypotheses", {"investigation_id": iid, "hypotheses": hyps}, "verify_fix")
        assert await phase() == "fixing"

        # Unknown ids are refused plainly.
        await d.refused(
            "get_investigation", {"investigation_id": "inv-nope"}, "does not exist", "list_investigations"
        )
        await d.refused("record_evidence", {"investigation_id": "inv-nope", "summary": "x"}, "does not exist")

        inv = await d.get(iid)
        refusals = [e for e in inv["timeline"] if e["kind"] == "refused"]
        assert len(refusals) >= 20
        assert all(e["data"]["next_step"] for e in refusals)


async def test_the_reproducer_belongs_to_the_diagnosis(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer=REPRO)
        await d.approved(iid)
        # begin_fix takes no reproducer (the argument is refused or ignored): the approved one runs.
        r = await c.call_tool(
            "begin_fix", {"investigation_id": iid, "description": "x", "reproducer": "true"}
        )
        if r.is_error:
            await d.ok("begin_fix", {"investigation_id": iid, "description": "x"})
        v = await d.ok("verify_fix", {"investigation_id": iid})
        assert not v["passed"] and v["attempt"]["exit_code"] == 1
        inv = await d.get(iid)
        assert inv["diagnoses"][-1]["reproducer"] == REPRO and REPRO in person.seen[-1]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_edit_gate_follows_the_phase_and_never_writes(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    status = edit_gate_status(ws)
    assert status.allowed and status.investigation_id is None
    assert not (ws / ".trainsleuth").exists()  # no database: allowed, and nothing created

    server, _, person = server_with_person(ws)
    db = default_state_path(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer=REPRO)
        status = edit_gate_status(ws)
        assert not status.allowed and status.investigation_id == iid
        assert "without an approved diagnosis" in status.reason and "submit_diagnosis" in status.next_step
        ev = await d.evidence(iid)
        await d.ok("submit_diagnosis", d.diagnosis(iid, ev))
        assert not edit_gate_status(ws).allowed
        await d.approve(iid)  # begins the first attempt: the gate opens for the one change
        await d.ok("begin_fix", {"investigation_id": iid, "description": "lr 1"})
        before = _digest(db)
        status = edit_gate_status(ws)
        assert status.allowed and status.investigation_id == iid and "verify_fix" in status.next_step
        assert _digest(db) == before  # read-only
        assert edit_gate_status(ws / "sub").allowed  # a folder inside the workspace follows the same state

        # A second open investigation without a diagnosis blocks edits again.
        iid2 = await d.start(symptom="eval accuracy drops")
        status = edit_gate_status(ws)
        assert not status.allowed and status.investigation_id == iid2
        (ws / "train.py").write_text("lr = 1\n")
        await d.ok("verify_fix", {"investigation_id": iid})
        assert not edit_gate_status(ws).allowed
        # The explicit state path gives the same answer.
        assert edit_gate_status(ws, state_path=db).investigation_id == iid2
        assert edit_gate_status(
            tmp_path / "elsewhere", state_path=db
        ).allowed  # another tree's investigations


def test_edit_gate_without_protocol_tables_and_with_a_broken_database(tmp_path: Path) -> None:
    import sqlite3

    ws = tmp_path / "ws"
    ws.mkdir()
    db = default_state_path(ws)
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as conn:  # a store other components (jobs) use, no investigations ever
        conn.execute("CREATE TABLE other (x)")
    assert edit_gate_status(ws).allowed
    db.unlink()
    db.write_bytes(b"this is not a database" * 100)
    status = edit_gate_status(ws)
    assert not status.allowed and "cannot read" in status.reason


async def test_a_diagnosis_without_its_disproof_is_refused_with_what_to_give(tmp_path: Path) -> None:
    """Guarantee 2 (docs/spec/interface.md): a diagnosis states what would disprove it. Resting on no
    confirmed hypothesis, one without disproving_observation is refused, and the refusal says so once,
    with the two ways to meet it (blind runs, round 3: two first diagnoses were refused for this alone)."""
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer=REPRO)
        ev = await d.evidence(iid)
        await d.refused(
            "submit_diagnosis",
            d.diagnosis(iid, ev, disproving_observation=""),
            "would disprove",
            "disproving_observation",
            "rule_out_if",
        )
        await d.ok("submit_diagnosis", d.diagnosis(iid, ev))

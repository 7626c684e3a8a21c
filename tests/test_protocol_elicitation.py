"""Approval through elicitation (accept / decline / cancel, both protocol revisions), the fallback for
clients without elicitation, and the elicitation-only server option. Real in-memory MCP clients."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from test_protocol_helpers import Driver, make_repo, server_with_person, text_of

from trainsleuth.protocol.gate import edit_gate_status

pytestmark = pytest.mark.anyio

MODES = [
    "legacy",
    "auto",
]  # the handshake-era revision (mid-call request) and the modern one (input_required)


def answering(action: str, content: dict[str, Any] | None = None, seen: list[str] | None = None) -> Any:
    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if seen is not None:
            seen.append(params.message)
        return types.ElicitResult(action=action, content=content)

    return callback


REPRO = "grep -q '^lr = 1$' train.py"


async def _submitted(d: Driver, confidence: float = 0.9) -> tuple[str, str]:
    iid = await d.start(reproducer=REPRO)
    ev = await d.evidence(iid)
    out = await d.ok("submit_diagnosis", d.diagnosis(iid, ev, confidence=confidence))
    return iid, str(out["diagnosis"]["id"])


@pytest.mark.parametrize("mode", MODES)
async def test_elicitation_accept_approves(tmp_path: Path, mode: str) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, _ = server_with_person(ws)
    seen: list[str] = []
    cb = answering("accept", {"decision": "approve", "comment": "makes sense", "name": "Ann"}, seen)
    async with Client(server, mode=mode, elicitation_callback=cb) as c:
        assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        d = Driver(c)
        iid, diag_id = await _submitted(d)
        assert not edit_gate_status(ws).allowed
        # The assistant cannot self-approve: approver/words are ignored, the person is asked.
        out = await d.ok(
            "approve_diagnosis", {"investigation_id": iid, "approver": "bot", "words": "trust me"}
        )
        assert out["path"] == "elicitation" and out["decision"] == "approve" and out["phase"] == "fixing"
        assert out["diagnosis"]["approval"]["approver"] == "Ann"
        assert out["diagnosis"]["approval"]["words"] == "makes sense"
        assert len(seen) == 1 and diag_id in seen[0] and "learning rate 10" in seen[0]
        inv = await d.get(iid)
        approved = [e for e in inv["timeline"] if e["kind"] == "diagnosis_approved"]
        assert approved and approved[0]["data"]["path"] == "elicitation"
        await d.ok("begin_fix", {"investigation_id": iid, "description": "lr to 1"})
        assert edit_gate_status(ws).allowed


@pytest.mark.parametrize("mode", MODES)
async def test_elicitation_reject_with_comment_goes_back_to_hypotheses(tmp_path: Path, mode: str) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, _ = server_with_person(ws)
    cb = answering("accept", {"decision": "reject", "comment": "look at the data loader first"})
    async with Client(server, mode=mode, elicitation_callback=cb) as c:
        d = Driver(c)
        iid, _ = await _submitted(d)
        out = await d.ok("approve_diagnosis", {"investigation_id": iid})
        assert out["decision"] == "reject" and out["phase"] == "hypotheses"
        assert out["diagnosis"]["status"] == "rejected"
        assert out["diagnosis"]["approval"]["words"] == "look at the data loader first"
        await d.refused("begin_fix", {"investigation_id": iid, "description": "x"}, "no approved diagnosis")


@pytest.mark.parametrize("mode", MODES)
async def test_elicitation_decline_rejects(tmp_path: Path, mode: str) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, _ = server_with_person(ws)
    async with Client(server, mode=mode, elicitation_callback=answering("decline")) as c:
        d = Driver(c)
        iid, _ = await _submitted(d)
        out = await d.ok("approve_diagnosis", {"investigation_id": iid})
        assert out["decision"] == "reject" and out["path"] == "elicitation" and out["phase"] == "hypotheses"
        await d.refused("begin_fix", {"investigation_id": iid, "description": "x"}, "no approved diagnosis")


@pytest.mark.parametrize("mode", MODES)
async def test_elicitation_cancel_leaves_it_awaiting_approval(tmp_path: Path, mode: str) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, _ = server_with_person(ws)
    async with Client(server, mode=mode, elicitation_callback=answering("cancel")) as c:
        d = Driver(c)
        iid, diag_id = await _submitted(d)
        await d.refused(
            "approve_diagnosis", {"investigation_id": iid}, "dismissed", "approve_diagnosis again"
        )
        inv = await d.get(iid)
        assert inv["phase"] == "diagnosis"
        assert next(x for x in inv["diagnoses"] if x["id"] == diag_id)["status"] == "awaiting_approval"
        assert any(e["kind"] == "approval_cancelled" for e in inv["timeline"])
        await d.refused("begin_fix", {"investigation_id": iid, "description": "x"}, "approve_diagnosis")


@pytest.mark.parametrize("mode", MODES)
async def test_low_confidence_is_not_put_to_the_person_before_review(tmp_path: Path, mode: str) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, _ = server_with_person(ws)
    seen: list[str] = []
    cb = answering("accept", {"decision": "approve"}, seen)
    async with Client(server, mode=mode, elicitation_callback=cb) as c:
        d = Driver(c)
        iid, _ = await _submitted(d, confidence=0.5)
        await d.refused("approve_diagnosis", {"investigation_id": iid}, "CONFIRMED", "record_review")
        assert seen == []
        await d.ok(
            "record_review",
            {
                "investigation_id": iid,
                "verdict": "CONFIRMED",
                "reviewer": "fresh agent",
                "reasoning": "solid",
            },
        )
        out = await d.ok("approve_diagnosis", {"investigation_id": iid})
        assert out["path"] == "elicitation" and out["phase"] == "fixing" and len(seen) == 1
        assert "Critical review: CONFIRMED" in seen[0]


async def test_without_elicitation_the_person_gives_a_one_time_code(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, person = server_with_person(ws)
    async with Client(server) as c:  # declares no elicitation capability
        d = Driver(c, person)
        iid, diag_id = await _submitted(d)
        # The server showed the person the diagnosis and a code at submission, on its own channel only.
        assert len(person.seen) == 1 and diag_id in person.seen[0] and "learning rate 10" in person.seen[0]
        code = person.code()
        for args in (
            {"investigation_id": iid},
            {"investigation_id": iid, "approver": "Ann Lee", "words": "Yes, fix the lr."},
        ):
            r = await c.call_tool("approve_diagnosis", args)
            assert r.is_error and "one-time code" in text_of(r) and code not in text_of(r)
        await d.refused("approve_diagnosis", {"investigation_id": iid, "code": "1234-5678"}, "wrong")
        code = person.code()  # each call without a code showed a fresh one
        out = await d.ok(
            "approve_diagnosis",
            {"investigation_id": iid, "code": code, "approver": "Ann Lee", "words": "Yes, fix the lr."},
        )
        assert out["path"] == "one_time_code" and out["phase"] == "fixing"
        approval = out["diagnosis"]["approval"]
        assert approval["approver"] == "Ann Lee" and approval["words"] == "Yes, fix the lr."
        assert "one-time code shown on" in approval["channel"] and approval["decision"] == "approve"
        inv = await d.get(iid)
        ev = next(e for e in inv["timeline"] if e["kind"] == "diagnosis_approved")
        assert ev["data"]["path"] == "one_time_code" and ev["data"]["approver"] == "Ann Lee"
        # A used code does not work twice, and nothing in any result ever carried it.
        assert all(code not in str(e) for e in inv["timeline"])
        text = text_of(await c.call_tool("get_investigation", {"investigation_id": iid}))
        assert "approved by Ann Lee via one time code" in text


async def test_a_rejection_needs_no_code(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid, _ = await _submitted(d)
        out = await d.ok(
            "approve_diagnosis", {"investigation_id": iid, "decision": "reject", "words": "check the data"}
        )
        assert out["decision"] == "reject" and out["phase"] == "hypotheses"


async def test_elicitation_only_is_kept_in_the_workspace_state(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, person = server_with_person(ws, elicitation_only=True)
    async with Client(server) as c:
        d = Driver(c, person)
        iid, _ = await _submitted(d)
        assert person.seen == []  # no code is offered where codes are not accepted
        await d.refused("approve_diagnosis", {"investigation_id": iid}, "only through elicitation")
        assert (await d.get(iid))["phase"] == "diagnosis"
    # A second server on the same workspace, started WITHOUT the flag, still refuses the fallback.
    plain, _, person2 = server_with_person(ws)
    async with Client(plain) as c:
        d = Driver(c, person2)
        await d.refused("approve_diagnosis", {"investigation_id": iid}, "only through elicitation")
        assert person2.seen == []
    # The same state, approved through elicitation by a capable client.
    cb = answering("accept", {"decision": "approve", "name": "Ann"})
    async with Client(plain, elicitation_callback=cb) as c:
        d = Driver(c)
        out = await d.ok("approve_diagnosis", {"investigation_id": iid})
        assert out["path"] == "elicitation" and out["phase"] == "fixing"

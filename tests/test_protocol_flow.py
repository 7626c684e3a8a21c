"""The whole protocol through a real in-memory MCP client: full pathway, review, rejection, timeline."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from test_protocol_helpers import Driver, make_repo, server_with_person, text_of

from trainsleuth.protocol.ledger import record_tool_evidence

pytestmark = pytest.mark.anyio

TRAIN = "lr = 10\n"
REPRO = "grep -q '^lr = 1$' train.py"


async def test_full_pathway_end_to_end(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": TRAIN})
    server, registry, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        started = await d.ok(
            "start_investigation",
            {
                "symptom": "loss is sometimes NaN",
                "expected": "loss decreases",
                "observed": "NaN at step 3 in some runs",
                "reproducible": "intermittent",
                "reproducer": REPRO,
            },
        )
        iid = started["investigation_id"]
        assert started["pathway"] == "full" and "intermittent" in started["pathway_reason"]
        assert started["phase"] == "investigating" and "propose_hypotheses" in started["next_step"]

        # Evidence from an analysis tool (the registry's path) and from the assistant.
        tool_ev = record_tool_evidence(
            registry.ctx.store, iid, "analyze_training_log", "NaN at step 3", {"step": 3}
        )
        ev = await d.evidence(iid)

        hyps = [
            {"statement": "lr too high", "confirm_if": "lr=1 stays finite", "rule_out_if": "lr=1 also NaN"},
            {"statement": "bad batch", "confirm_if": "NaN input", "rule_out_if": "inputs finite"},
            {
                "statement": "fp16 overflow",
                "confirm_if": "inf in activations",
                "rule_out_if": "fp32 also NaN",
            },
        ]
        out = await d.ok("propose_hypotheses", {"investigation_id": iid, "hypotheses": hyps})
        h1, h2, _h3 = (h["id"] for h in out["hypotheses"])
        assert out["under_test"] == h1 and [h["status"] for h in out["hypotheses"]] == [
            "testing",
            "pending",
            "pending",
        ]
        # Rule the first out: the second goes under test.
        r = await d.ok(
            "resolve_hypothesis",
            {"investigation_id": iid, "hypothesis_id": h1, "outcome": "ruled_out", "evidence_ids": [tool_ev]},
        )
        assert r["now_testing"]["id"] == h2
        await d.ok(
            "resolve_hypothesis",
            {"investigation_id": iid, "hypothesis_id": h2, "outcome": "confirmed", "evidence_ids": [ev]},
        )

        # Low confidence: review required; CHALLENGED sends it back to hypotheses.
        diag = await d.ok("submit_diagnosis", d.diagnosis(iid, ev, confidence=0.6, hypothesis_id=h2))
        assert diag["diagnosis"]["status"] == "awaiting_review" and "record_review" in diag["next_step"]
        rev = await d.ok(
            "record_review",
            {
                "investigation_id": iid,
                "verdict": "CHALLENGED",
                "reviewer": "critical-review subagent",
                "reasoning": "the NaN also appears before the lr change",
                "alternative_explanations": ["corrupt shard"],
            },
        )
        assert rev["phase"] == "hypotheses" and rev["diagnosis"]["status"] == "sent_back"

        # Resubmit; CONFIRMED review; the person rejects (fallback path) -> back to hypotheses.
        diag = await d.ok("submit_diagnosis", d.diagnosis(iid, ev, confidence=0.7))
        await d.ok(
            "record_review",
            {
                "investigation_id": iid,
                "verdict": "CONFIRMED",
                "reviewer": "reviewer",
                "reasoning": "holds up",
            },
        )
        rej = await d.ok(
            "approve_diagnosis",
            {
                "investigation_id": iid,
                "approver": "Ann",
                "words": "check the data first",
                "decision": "reject",
            },
        )
        assert rej["decision"] == "reject" and rej["phase"] == "hypotheses"

        diag = await d.ok("submit_diagnosis", d.diagnosis(iid, ev, confidence=0.95))
        approved = await d.approve(iid, words="approved")
        assert approved["path"] == "one_time_code" and approved["phase"] == "fixing"
        assert approved["diagnosis"]["approval"]["words"] == "approved"

        await d.ok("begin_fix", {"investigation_id": iid, "description": "lr back to 1"})
        (ws / "train.py").write_text("lr = 1\n")
        v = await d.ok("verify_fix", {"investigation_id": iid})
        assert v["passed"] and v["phase"] == "resolved" and v["attempt"]["changed_files"] == ["train.py"]
        assert "-lr = 10" in v["attempt"]["diff"] and v["attempt"]["exit_code"] == 0

        inv = await d.get(iid)
        kinds = [e["kind"] for e in inv["timeline"]]
        for kind in (
            "started",
            "evidence",
            "hypotheses_proposed",
            "hypothesis_resolved",
            "diagnosis_submitted",
            "review_recorded",
            "diagnosis_rejected",
            "diagnosis_approved",
            "fix_begun",
            "resolved",
        ):
            assert kind in kinds, kind
        assert all(e["at_iso"].startswith("20") for e in inv["timeline"])
        assert [e["seq"] for e in inv["timeline"]] == sorted(e["seq"] for e in inv["timeline"])
        assert any(e["source"] == "verify_fix" for e in inv["evidence"])
        assert any(e["source"] == "analyze_training_log" for e in inv["evidence"])

        listed = await d.ok("list_investigations", {})
        assert [i["id"] for i in listed["investigations"]] == [iid]
        assert listed["investigations"][0]["phase"] == "resolved"

        closed = await d.ok(
            "capture_knowledge",
            {"investigation_id": iid, "lessons": ["check the lr first"], "no_new_knowledge": True,
             "no_knowledge_reason": "lr sensitivity is already constraint 3"},
        )  # fmt: skip
        rca = Path(closed["rca_path"])
        assert rca.parent == ws / ".trainsleuth" / "rca" and closed["phase"] == "closed"
        text = rca.read_text()
        for section in ("## Problem", "## Root causes (ranked)", "## Fixes", "## Verification", "## Lessons"):
            assert section in text
        assert "check the lr first" in text and "No new knowledge: lr sensitivity" in text
        assert ev in text and "CONFIRMED" in text and "-lr = 10" in text
        open_only = await d.ok("list_investigations", {"include_closed": False})
        assert open_only["investigations"] == []


async def test_resources_and_prompts(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": TRAIN})
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer=REPRO)
        ev = await d.evidence(iid, "grad norm 1e9 at step 2")
        await d.ok("submit_diagnosis", d.diagnosis(iid, ev, confidence=0.6))

        res = await c.read_resource(f"investigation://{iid}")
        body = res.contents[0].text  # type: ignore[union-attr]
        assert iid in body and "grad norm 1e9" in body and "awaiting_review" in body

        templates = {t.uri_template for t in (await c.list_resource_templates()).resource_templates}
        assert "investigation://{investigation_id}" in templates
        uris = {str(r.uri) for r in (await c.list_resources()).resources}
        assert {"protocol://debugging", "protocol://gate-4-template"} <= uris
        proto = (await c.read_resource("protocol://debugging")).contents[0].text  # type: ignore[union-attr]
        assert "three" in proto.lower() and "begin_fix" in proto
        tmpl = (await c.read_resource("protocol://gate-4-template")).contents[0].text  # type: ignore[union-attr]
        assert "disproving_observation" in tmpl and "evidence_ids" in tmpl

        prompts = {p.name for p in (await c.list_prompts()).prompts}
        assert {"critical_review", "debug_protocol"} <= prompts
        review = await c.get_prompt("critical_review", {"investigation_id": iid})
        text = review.messages[0].content.text  # type: ignore[union-attr]
        assert "CONFIRMED" in text and "CHALLENGED" in text and "INSUFFICIENT_EVIDENCE" in text
        assert "learning rate 10" in text and "grad norm 1e9" in text and "record_review" in text
        guide = await c.get_prompt("debug_protocol", {})
        gtext = guide.messages[0].content.text  # type: ignore[union-attr]
        assert "start_investigation" in gtext and "verify_fix" in gtext

        with pytest.raises(MCPError, match="does not exist"):
            await c.read_resource("investigation://inv-missing")
        bad = await c.get_prompt("critical_review", {"investigation_id": "inv-missing"})
        assert "does not exist" in bad.messages[0].content.text  # type: ignore[union-attr]


async def test_analysis_tool_results_become_citable_evidence(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": TRAIN})
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer=REPRO)
        out = await d.ok(
            "lookup_constraints", {"query": "loss NaN learning rate too high", "investigation_id": iid}
        )
        ev = out["evidence_id"]
        assert ev and re.fullmatch(r"e\d+", ev)
        inv = await d.get(iid)
        item = next(e for e in inv["evidence"] if e["id"] == ev)
        assert item["source"] == "lookup_constraints"
        diag = await d.ok("submit_diagnosis", d.diagnosis(iid, ev))
        assert diag["diagnosis"]["evidence_ids"] == [ev]
        bad = await c.call_tool("lookup_constraints", {"query": "nan", "investigation_id": "inv-missing"})
        assert bad.is_error and "does not exist" in text_of(bad)

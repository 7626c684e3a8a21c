"""capture_knowledge: the RCA document, a new constraint and fix pattern in the project's own files,
or an explicit 'no new knowledge'; plus the suggestions start_investigation makes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from test_protocol_helpers import Driver, make_repo, server_with_person, text_of

from trainsleuth.protocol.gate import edit_gate_status

pytestmark = pytest.mark.anyio

REPRO = "grep -q '^lr = 1$' train.py"
CONSTRAINTS = """\
# Project constraints

## Optimisation

### 1. Learning rate stays below 3 for SGD
Higher rates diverge within a few hundred steps.

### 2. Warmup is at least 500 steps
- Shorter warmup spikes the loss with Adam.

## Data

### 3. Labels are integers in [0, num_classes)
- Checked in the dataset constructor.
"""


async def _resolved(d: Driver, ws: Path) -> str:
    iid = await d.start(reproducer=REPRO, symptom="loss becomes NaN after raising the learning rate")
    await d.approved(iid)
    await d.ok("begin_fix", {"investigation_id": iid, "description": "lr back to 1"})
    (ws / "train.py").write_text("lr = 1\n")
    assert (await d.ok("verify_fix", {"investigation_id": iid}))["passed"]
    return iid


async def test_capture_constraint_and_fix_pattern(tmp_path: Path) -> None:
    ws = make_repo(
        tmp_path / "ws", {"train.py": "lr = 10\n", ".agents/knowledge/constraints.md": CONSTRAINTS}
    )
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        started = await d.ok(
            "start_investigation", {"symptom": "loss becomes NaN after raising the learning rate for SGD"}
        )
        kinds = {s["kind"] for s in started["suggestions"]}
        assert "constraint" in kinds, started  # the project's own constraint 1 is suggested
        iid = await _resolved(d, ws)
        await d.refused(
            "capture_knowledge",
            {"investigation_id": iid, "no_new_knowledge": True},
            "reason",
        )
        await d.refused(
            "capture_knowledge",
            {
                "investigation_id": iid,
                "no_new_knowledge": True,
                "no_knowledge_reason": "x",
                "fix_pattern": True,
            },
            "contradicts",
        )
        await d.refused(
            "capture_knowledge",
            {"investigation_id": iid, "constraint": {"title": "t", "rule": " "}},
            "title and a rule",
        )
        assert (ws / ".agents/knowledge/constraints.md").read_text() == CONSTRAINTS
        out = await d.ok(
            "capture_knowledge",
            {
                "investigation_id": iid,
                "lessons": ["Check the learning rate against constraint 1 before anything else."],
                "rca_dir": "postmortems",
                "constraint": {
                    "title": "Learning-rate changes need a short smoke run",
                    "rule": "Any learning-rate change runs 200 steps and checks the loss is finite.",
                    "details": ["The reproducer from this investigation does that."],
                    "category": "Optimisation",
                },
                "fix_pattern": True,
            },
        )
        assert out["phase"] == "closed" and out["constraint"]["number"] == "4"
        text = (ws / ".agents/knowledge/constraints.md").read_text()
        assert text.startswith(CONSTRAINTS.split("## Data")[0].rstrip()[:60])
        assert "Learning-rate changes need a short smoke run" in text and "### 4." in text
        assert text.index("### 4.") < text.index("## Data")  # filed under its category
        patterns = Path(out["fix_pattern"]["file"])
        assert patterns == ws / ".agents/knowledge/fix-patterns.md"
        ptext = patterns.read_text()
        for field in ("Symptom", "Root Cause", "Fix", "Lesson", "Related Constraint"):
            assert field in ptext
        assert "learning rate 10 is far too high" in ptext and "set lr back to 1" in ptext
        rca = Path(out["rca_path"])
        assert rca.parent == ws / "postmortems"
        rtext = rca.read_text()
        assert "New constraint 4" in rtext and out["fix_pattern"]["id"] in rtext
        assert "Check the learning rate against constraint 1" in rtext
        await d.refused(
            "capture_knowledge", {"investigation_id": iid, "lessons": ["again"]}, "already closed"
        )
        inv = await d.get(iid)
        assert inv["knowledge"]["constraint"]["number"] == "4" and inv["timeline"][-1]["kind"] == "closed"


async def test_an_rca_dir_outside_the_workspace_is_not_refused_and_not_written(tmp_path: Path) -> None:
    """Blind runs (round 3): capture_knowledge rca_dir=/tmp/... was still refused. Nothing is written
    outside the workspace; the RCA goes where leaving rca_dir out sends it, and the answer says so."""
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await _resolved(d, ws)
        result = await c.call_tool(
            "capture_knowledge",
            {"investigation_id": iid, "lessons": ["lr 1"], "rca_dir": str(tmp_path / "x")},
        )
        text = text_of(result)
        assert not result.is_error, text
        assert result.structured_content is not None and result.structured_content["phase"] == "closed"
        rca = Path(result.structured_content["rca_path"])
        assert rca.parent == ws / ".trainsleuth" / "rca" and rca.exists()
        assert not (tmp_path / "x").exists()
        assert "rca_dir" in text and "outside the workspace" in text and "not used" in text


async def test_abandoning_an_unresolved_investigation_needs_the_person(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, person = server_with_person(ws)
    async with Client(server) as c:  # no elicitation: the person's one-time code
        d = Driver(c, person)
        iid = await d.start(reproducer=REPRO)
        args = {
            "investigation_id": iid,
            "abandon": True,
            "abandon_reason": "the problem went away with the new data",
        }
        await d.refused("capture_knowledge", {"investigation_id": iid, "abandon": True}, "reason")
        await d.refused("capture_knowledge", {**args, "approver": "Ann", "words": "drop it"}, "one-time code")
        assert "abandon" in person.seen[-1] and "went away" in person.seen[-1]
        await d.approved(iid)
        await d.ok("begin_fix", {"investigation_id": iid, "description": "lr 1"})
        await d.refused("capture_knowledge", {**args, "code": "1111-2222"}, "verify_fix")
        (ws / "train.py").write_text("lr = 3\n")
        await d.ok("verify_fix", {"investigation_id": iid, "revert": True})
        assert not edit_gate_status(ws).allowed
        await d.refused("capture_knowledge", args, "one-time code")
        out = await d.ok(
            "capture_knowledge", {**args, "code": person.code(), "approver": "Ann", "words": "drop it"}
        )
        assert out["phase"] == "abandoned" and out["abandoned"]["path"] == "one_time_code"
        assert "Abandoned unresolved" in Path(out["rca_path"]).read_text()
        assert edit_gate_status(ws).allowed
        inv = await d.get(iid)
        assert (
            inv["timeline"][-1]["kind"] == "abandoned" and inv["timeline"][-1]["data"]["words"] == "drop it"
        )
        await d.refused("begin_fix", {"investigation_id": iid, "description": "x"}, "no approved diagnosis")

    answers = iter(["keep open", "abandon"])

    async def decide(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"decision": next(answers), "name": "Bo"})

    async with Client(server, elicitation_callback=decide) as c:
        d = Driver(c)
        iid = await d.start(reproducer=REPRO)
        args = {
            "investigation_id": iid,
            "abandon": True,
            "abandon_reason": "duplicate of another investigation",
        }
        await d.refused("capture_knowledge", args, "keep the investigation open")
        assert (await d.get(iid))["phase"] == "investigating"
        out = await d.ok(
            "capture_knowledge", {**args, "approver": "bot", "words": "ignored"}
        )  # the person is asked
        assert out["abandoned"]["path"] == "elicitation" and out["abandoned"]["approver"] == "Bo"

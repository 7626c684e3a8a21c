"""Fix attempts on real git repositories: snapshots that never touch the user's work, diffs, revert,
displaced/shotgun warnings, escalation, three strikes. Real in-memory MCP client, real git, real shells."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from test_protocol_helpers import Driver, git, make_repo, server_with_person, text_of

from trainsleuth.protocol.gate import edit_gate_status
from trainsleuth.protocol.machine import Protocol
from trainsleuth.protocol.models import DiagnosisSpec, ProposedFix
from trainsleuth.state.store import Store, default_state_path

pytestmark = pytest.mark.anyio

REPRO = "grep -q '^lr = 1$' train.py"
FILES = {
    "train.py": "lr = 10\n",
    "model.py": "layers = 2\n",
    "data.py": "batch = 8\n",
    "bin/run.sh": "#!/bin/sh\n",
}


def user_state(ws: Path) -> dict[str, object]:
    return {
        "status": git(ws, "status", "--porcelain", "--untracked-files=all"),
        "staged": git(ws, "diff", "--cached"),
        "head": git(ws, "rev-parse", "HEAD"),
        "branches": git(ws, "branch", "--list"),
        "stash": git(ws, "stash", "list"),
    }


def dirty_repo(tmp_path: Path) -> Path:
    ws = make_repo(tmp_path / "ws", FILES)
    (ws / "model.py").write_text("layers = 2\nwidth = 512  # user's uncommitted work\n")
    (ws / "data.py").write_text("batch = 16  # staged by the user\n")
    git(ws, "add", "data.py")
    (ws / "notes.md").write_text("my untracked notes\n")
    return ws


async def test_dirty_tree_failed_attempt_revert_keeps_user_work(tmp_path: Path) -> None:
    ws = dirty_repo(tmp_path)
    before_state = user_state(ws)
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer=REPRO, pathway="full")
        await d.approved(iid, hypotheses=True)
        out = await d.ok("begin_fix", {"investigation_id": iid, "description": "lower lr"})
        attempt = out["attempt"]
        assert attempt["was_dirty"] and attempt["base_head"] == str(before_state["head"]).strip()
        assert attempt["snapshot_ref"].startswith("refs/trainsleuth/")
        # Snapshotting changed nothing the user can see.
        assert user_state(ws) == before_state
        assert (ws / "model.py").read_text().endswith("user's uncommitted work\n")

        # A wrong attempt that also edits the user's dirty file, adds one file and deletes another.
        (ws / "train.py").write_text("lr = 5\n")
        (ws / "model.py").write_text((ws / "model.py").read_text() + "dropout = 0.1\n")
        (ws / "helper.py").write_text("x = 1\n")
        (ws / "bin" / "run.sh").unlink()
        v = await d.ok(
            "verify_fix", {"investigation_id": iid, "revert": True, "learned": "lr 5 still diverges"}
        )
        a = v["attempt"]
        assert not v["passed"] and v["strikes"] == 1 and v["phase"] == "approved"
        assert a["exit_code"] == 1 and a["status"] == "failed" and a["evidence_id"]
        assert sorted(a["changed_files"]) == ["bin/run.sh", "helper.py", "model.py", "train.py"]
        assert "+lr = 5" in a["diff"] and "+dropout = 0.1" in a["diff"]
        assert any(w.startswith("displaced fix") and "model.py" in w for w in a["warnings"])
        assert sorted(a["reverted"]) == ["bin/run.sh", "helper.py", "model.py", "train.py"]

        # Only the attempt's changes are gone; every piece of the user's uncommitted work is intact.
        assert (ws / "train.py").read_text() == "lr = 10\n"
        assert (ws / "model.py").read_text() == "layers = 2\nwidth = 512  # user's uncommitted work\n"
        assert (ws / "data.py").read_text() == "batch = 16  # staged by the user\n"
        assert (ws / "notes.md").read_text() == "my untracked notes\n"
        assert (ws / "bin" / "run.sh").read_text() == "#!/bin/sh\n" and not (ws / "helper.py").exists()
        assert user_state(ws) == before_state

        # Second attempt: the right change passes; the user's work is still there.
        await d.ok("begin_fix", {"investigation_id": iid, "description": "lr back to 1"})
        (ws / "train.py").write_text("lr = 1\n")
        v = await d.ok("verify_fix", {"investigation_id": iid, "revert": True})
        assert v["passed"] and v["phase"] == "resolved" and v["attempt"]["changed_files"] == ["train.py"]
        assert v["attempt"]["warnings"] == [] or "nothing was reverted" in v["attempt"]["warnings"][0]
        assert (ws / "train.py").read_text() == "lr = 1\n"
        assert (ws / "model.py").read_text().endswith("user's uncommitted work\n")
        assert git(ws, "diff", "--cached") == before_state["staged"]
        inv = await d.get(iid)
        assert [x["status"] for x in inv["attempts"]] == ["failed", "passed"]
        assert inv["attempts"][0]["learned"] == "lr 5 still diverges"
        verify_ev = [e for e in inv["evidence"] if e["source"] == "verify_fix"]
        assert len(verify_ev) == 2 and "exit code 1" in verify_ev[0]["summary"]


async def test_shotgun_and_no_change_warnings(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n", **{f"m{i}.py": f"v = {i}\n" for i in range(7)}})
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer=REPRO, pathway="full")
        await d.approved(iid, hypotheses=True)
        await d.ok("begin_fix", {"investigation_id": iid, "description": "nothing yet"})
        v = await d.ok("verify_fix", {"investigation_id": iid})
        assert any("changed nothing" in w for w in v["attempt"]["warnings"])
        await d.ok("begin_fix", {"investigation_id": iid, "description": "touch everything"})
        for i in range(7):
            (ws / f"m{i}.py").write_text(f"v = {i + 1}\n")
        v = await d.ok("verify_fix", {"investigation_id": iid, "revert": True})
        assert any(w.startswith("shotgun fix: 7 files") for w in v["attempt"]["warnings"])
        assert all((ws / f"m{i}.py").read_text() == f"v = {i}\n" for i in range(7))


async def test_three_strikes_halt_until_a_different_root_cause_is_approved(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", FILES)
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer=REPRO, pathway="full")
        ev = await d.evidence(iid)
        await d.full_hypotheses(iid, ev)
        await d.ok("submit_diagnosis", d.diagnosis(iid, ev))
        await d.approve(iid, words="go")
        for n, lr in enumerate(["5", "3", "2"], 1):
            await d.ok("begin_fix", {"investigation_id": iid, "description": f"lr {lr}"})
            (ws / "train.py").write_text(f"lr = {lr}\n")
            v = await d.ok(
                "verify_fix", {"investigation_id": iid, "revert": True, "learned": f"lr {lr} fails"}
            )
            assert not v["passed"] and v["strikes"] == n
            if n == 2:
                # Resubmitting the same root cause (reworded) does not reset the strikes.
                reworded = d.diagnosis(
                    iid, ev, root_cause="Learning rate of 10 is far too high for SGD on this model"
                )
                assert (await d.ok("submit_diagnosis", reworded))["diagnosis"]["failed_attempts"] == 2
                await d.approve(iid, words="once more")
        assert v["phase"] == "halted"
        report = v["three_strike_report"]
        for needle in (
            "Attempt 1",
            "Attempt 2",
            "Attempt 3",
            "+lr = 3",
            "lr 2 fails",
            "Assumptions to re-examine",
        ):
            assert needle in report, needle
        gate = edit_gate_status(ws)
        assert not gate.allowed and "three" in gate.reason and gate.investigation_id == iid

        text = await d.refused("begin_fix", {"investigation_id": iid, "description": "lr 1"}, "three strikes")
        assert "Attempt 3" in text and "different root cause" in text
        # The same root cause, reworded slightly, is refused.
        same = d.diagnosis(iid, ev, root_cause="Learning rate 10 is far too high for SGD on this model.")
        await d.refused("submit_diagnosis", same, "different root cause")
        await d.refused("begin_fix", {"investigation_id": iid, "description": "again"}, "three strikes")

        # A different root cause, approved: fixing is allowed again.
        ev2 = await d.evidence(iid, "the loss is summed, not averaged, over 512 tokens")
        new = d.diagnosis(
            iid, ev2, root_cause="the loss reduction is sum instead of mean", evidence_ids=[ev2]
        )
        await d.ok("submit_diagnosis", new)
        await d.refused("begin_fix", {"investigation_id": iid, "description": "x"}, "approve_diagnosis")
        await d.approve(iid, words="try it")
        out = await d.ok("begin_fix", {"investigation_id": iid, "description": "mean reduction"})
        assert out["attempt"]["number"] == 1
        inv = await d.get(iid)
        assert [x["status"] for x in inv["diagnoses"]] == ["superseded", "struck_out", "approved"]
        assert "halted" in [e["kind"] for e in inv["timeline"]]


async def test_quick_pathway_escalates_after_first_failed_attempt(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", FILES)
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer=REPRO)
        assert (await d.get(iid))["pathway"] == "quick"
        await d.approved(iid)  # quick pathway: no hypotheses needed
        await d.ok("begin_fix", {"investigation_id": iid, "description": "lr 5"})
        (ws / "train.py").write_text("lr = 5\n")
        v = await d.ok("verify_fix", {"investigation_id": iid, "revert": True})
        assert v["escalation"]["reason"] == "the first fix attempt failed"
        assert any("switched from the quick pathway" in n for n in v["notices"])
        text = text_of(await c.call_tool("get_investigation", {"investigation_id": iid}))
        assert "escalated: the first fix attempt failed" in text
        inv = await d.get(iid)
        assert inv["pathway"] == "full" and "escalated" in [e["kind"] for e in inv["timeline"]]
        await d.refused("begin_fix", {"investigation_id": iid, "description": "again"}, "propose_hypotheses")
        ev = await d.evidence(iid, "lr 5 also diverges")
        await d.full_hypotheses(iid, ev)
        await d.ok("begin_fix", {"investigation_id": iid, "description": "lr 1"})


def test_quick_pathway_escalates_after_fifteen_minutes(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", FILES)
    now = [1_000_000.0]
    proto = Protocol(Store(default_state_path(ws), workspace=ws), clock=lambda: now[0])
    view = proto.start(
        symptom="loss becomes NaN after the learning-rate change",
        workspace=ws,
        reproducible="always",
        what_changed="raised lr from 1 to 10",
        reproducer=REPRO,
    )
    assert view.pathway == "quick"
    ev = proto.record_evidence(view.id, "lr is 10", {"lr": 10})
    now[0] += 16 * 60  # sixteen minutes pass without a resolution
    proto.record_evidence(view.id, "still NaN", None)
    assert any("16 minutes" in n for n in proto.notices)
    later = Protocol(Store(default_state_path(ws), workspace=ws), clock=lambda: now[0])
    later.record_evidence(view.id, "again", None)
    assert later.notices == []  # announced once
    inv = later.get(view.id)
    assert inv.pathway == "full" and inv.escalation and "16 minutes" in inv.escalation["reason"]
    spec = DiagnosisSpec(
        symptom="NaN",
        root_cause="lr too high",
        evidence_ids=[ev],
        mechanism="overshoot",
        proposed_fix=ProposedFix(files=["train.py"], change="lr 1"),
        confidence=0.9,
        disproving_observation="NaN with lr 1",
    )
    with pytest.raises(Exception, match=r"confirmed hypothesis.*escalated"):
        later.submit_diagnosis(view.id, spec)


async def test_reproducer_timeout_is_a_failed_attempt(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", FILES)
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer="sleep 30", reproducer_timeout_s=1)
        await d.approved(iid)  # a hang is a failure: the server's run on the unfixed tree times out
        await d.ok("begin_fix", {"investigation_id": iid, "description": "x"})
        (ws / "train.py").write_text("lr = 1\n")
        v = await d.ok("verify_fix", {"investigation_id": iid, "timeout_s": 1})
        assert not v["passed"] and v["attempt"]["timed_out"] and v["strikes"] == 1


async def test_a_diagnosis_needs_a_git_repository_and_a_reproducer(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "train.py").write_text("lr = 10\n")
    server, _, person = server_with_person(plain)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer=REPRO)
        ev = await d.evidence(iid)
        await d.refused("submit_diagnosis", d.diagnosis(iid, ev), "git init")
        assert (plain / "train.py").read_text() == "lr = 10\n"
        iid2 = await d.start(symptom="eval accuracy is stuck at chance")  # no reproducer anywhere
        ev2 = await d.evidence(iid2)
        await d.refused("submit_diagnosis", d.diagnosis(iid2, ev2), "reproducer")
        await d.refused("begin_fix", {"investigation_id": iid2, "description": "x"}, "submit_diagnosis")


async def test_changing_the_reproducer_does_not_count_as_a_fix(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {**FILES, "check.sh": "grep -q '^lr = 1$' train.py\n"})
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer="sh ./check.sh")
        await d.approved(iid)
        await d.ok("begin_fix", {"investigation_id": iid, "description": "make the check pass"})
        (ws / "check.sh").write_text("exit 0\n")
        v = await d.ok("verify_fix", {"investigation_id": iid, "revert": True})
        a = v["attempt"]
        assert not v["passed"] and a["exit_code"] == 0 and a["status"] == "active" and v["phase"] == "fixing"
        assert a["unapproved"] == ["check.sh"] and v["strikes"] == 0
        assert any("changed outside the approved fix" in w and "check.sh" in w for w in a["warnings"])
        assert "check.sh" in v["next_step"] and (ws / "check.sh").read_text() == "exit 0\n"
        inv = await d.get(iid)
        assert "not resolved" in next(e for e in inv["evidence"] if e["source"] == "verify_fix")["summary"]
        # Undo the change to the reproducer, make the real fix: now it counts.
        (ws / "check.sh").write_text("grep -q '^lr = 1$' train.py\n")
        (ws / "train.py").write_text("lr = 1\n")
        v = await d.ok("verify_fix", {"investigation_id": iid})
        assert v["passed"] and v["phase"] == "resolved" and v["attempt"]["unapproved"] == []

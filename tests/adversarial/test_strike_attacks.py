"""Attacks on three strikes (issue 15.5): a reworded diagnosis, a new or a parallel investigation of the same
problem, the same change under a "different" root cause, starting fresh without the person. A real server
over stdio, real git, the person deciding in a real terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from protocol_attack_helpers import edit, stdio_session
from test_protocol_helpers import Driver, make_repo, server_with_person

pytestmark = pytest.mark.anyio

REPRO = "grep -q '^lr = 1$' train.py"
FILES = {"train.py": "lr = 10\n", "model.py": "layers = 2\n"}


async def _fail(d: Driver, ws: Path, iid: str, lr: str) -> dict[str, object]:
    await d.ok("begin_fix", {"investigation_id": iid, "description": f"lr {lr}"})
    (ws / "train.py").write_text(f"lr = {lr}\n")
    return await d.ok("verify_fix", {"investigation_id": iid, "revert": True})


async def test_rewording_or_reopening_does_not_reset_the_strikes(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", FILES)
    async with stdio_session(ws) as d:
        iid = await d.start(reproducer=REPRO, pathway="full")
        ev = await d.evidence(iid)
        await d.full_hypotheses(iid, ev)
        await d.ok("submit_diagnosis", d.diagnosis(iid, ev))
        await d.approve(iid)
        assert (await _fail(d, ws, iid, "5"))["strikes"] == 1
        assert (await _fail(d, ws, iid, "3"))["strikes"] == 2
        # Attack 1: a paraphrased diagnosis, far enough from the first wording to look new.
        paraphrase = d.diagnosis(iid, ev, root_cause="SGD diverges because its step size is excessive")
        assert (await d.ok("submit_diagnosis", paraphrase))["diagnosis"]["failed_attempts"] == 2
        await d.approve(iid)
        v = await _fail(d, ws, iid, "2")
        assert v["strikes"] == 3 and v["phase"] == "halted"

        # Attack 2: open a new investigation for the same symptom.
        new = await d.ok(
            "start_investigation",
            {"symptom": "loss becomes NaN after the learning-rate change", "reproducer": REPRO,
             "reproducible": "always", "what_changed": "lr"},
        )  # fmt: skip
        assert new["linked"]["to"] == iid and new["phase"] == "halted" and "halted" in new["notices"][0]
        ev2 = await d.evidence(new["investigation_id"])
        await d.refused(
            "submit_diagnosis",
            d.diagnosis(new["investigation_id"], ev2, root_cause="Learning rate 10 is far too high for SGD"),
            "different root cause",
        )
        await d.refused(
            "begin_fix", {"investigation_id": new["investigation_id"], "description": "x"}, "three"
        )
        # Attack 3: the same, described differently, with the reproducer of the first.
        other = await d.ok(
            "start_investigation", {"symptom": "training diverges to not-a-number", "reproducer": REPRO}
        )
        assert other["linked"]["to"] in (iid, new["investigation_id"]) and other["phase"] == "halted"
        assert not edit(ws)["allowed"]


async def test_the_same_change_under_a_new_cause_halts_at_once(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", FILES)
    async with stdio_session(ws) as d:
        iid = await d.start(reproducer=REPRO)
        await d.approved(iid)
        await _fail(d, ws, iid, "5")  # the first failure escalates the quick pathway: hypotheses now
        ev = await d.evidence(iid, "more evidence")
        await d.full_hypotheses(iid, ev)
        await _fail(d, ws, iid, "3")
        v = await _fail(d, ws, iid, "2")  # the third strike on the problem halts it
        assert v["phase"] == "halted"
        # A "different" root cause, approved by the person...
        new = d.diagnosis(iid, ev, root_cause="the optimizer state carries an overflowed momentum buffer")
        await d.ok("submit_diagnosis", new)
        await d.approve(iid)
        # ...whose attempt is the very change that already failed: recognised by its diff, halted again.
        v = await _fail(d, ws, iid, "5")
        assert v["phase"] == "halted" and v["strikes"] == 1
        assert any("repeats the change of" in w for w in v["attempt"]["warnings"])
        assert "root cause has not changed" in v["three_strike_report"]


async def test_a_parallel_investigation_shares_strikes_and_fresh_needs_the_person(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", FILES)
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        first = await d.start(reproducer=REPRO)
        await d.approved(first)
        # Attack: a parallel investigation of the same symptom, to get a fresh set of three attempts.
        second = await d.ok(
            "start_investigation",
            {"symptom": "loss becomes NaN after the learning-rate change", "reproducer": "sh -c 'grep -q 1 train.py'",
             "reproducible": "always", "what_changed": "lr"},
        )  # fmt: skip
        sid = second["investigation_id"]
        assert second["linked"]["to"] == first
        await _fail(d, ws, first, "5")
        assert (await d.get(sid))["strikes"] == 1  # the first's strike counts for the second
        # Attack: ask to start fresh; the person is asked (here through the code they were shown) and the
        # call is refused until they agree.
        fresh = {
            "symptom": "loss becomes NaN after the learning-rate change",
            "fresh": True,
            "reproducer": REPRO,
        }
        await d.refused("start_investigation", fresh, "person")
        assert "start fresh" in person.seen[-1] and (first in person.seen[-1] or sid in person.seen[-1])
        out = await d.ok("start_investigation", {**fresh, "code": person.code()})
        assert out["linked"] is None and out["phase"] == "investigating"
        inv = await d.get(out["investigation_id"])
        assert inv["strikes"] == 0 and any(e["kind"] == "started_fresh" for e in inv["timeline"])

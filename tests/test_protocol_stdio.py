"""The protocol guarantees over stdio with the installed `trainsleuth serve`, and the restart test:
the server process is killed mid-investigation and a new one on the same workspace carries on."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import mcp_types as types
import psutil
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client
from test_protocol_helpers import Driver, TerminalPerson, make_repo, stdio_params

from trainsleuth.protocol.gate import edit_gate_status

pytestmark = pytest.mark.anyio

REPRO = "grep -q '^lr = 1$' train.py"


def _server_processes(ws: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            cmd = proc.cmdline()
        except psutil.Error:
            continue
        if "serve" in cmd and str(ws) in cmd:
            found.append(proc)
    return found


async def test_restart_mid_investigation_over_stdio(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n", "model.py": "layers = 2\n"})
    killed = False
    errlog = tmp_path / "server-stderr.txt"
    try:
        with errlog.open("w") as err:
            async with Client(stdio_client(stdio_params(ws), errlog=err)) as c:
                d = Driver(c, TerminalPerson(ws))
                iid = await d.start(reproducer=REPRO, pathway="full")
                ev = await d.evidence(iid)
                # Guarantee 1 and 2 over stdio.
                await d.refused(
                    "begin_fix", {"investigation_id": iid, "description": "x"}, "no approved diagnosis"
                )
                await d.refused("submit_diagnosis", d.diagnosis(iid, ev, evidence_ids=[]), "evidence")
                await d.refused(
                    "submit_diagnosis", d.diagnosis(iid, ev, disproving_observation=""), "disprove"
                )
                await d.full_hypotheses(iid, ev)
                # Guarantee 3 over stdio.
                await d.ok("submit_diagnosis", d.diagnosis(iid, ev, confidence=0.6))
                await d.refused(
                    "approve_diagnosis",
                    {"investigation_id": iid, "approver": "A", "words": "ok"},
                    "CONFIRMED",
                )
                await d.ok(
                    "record_review",
                    {
                        "investigation_id": iid,
                        "verdict": "CONFIRMED",
                        "reviewer": "fresh agent",
                        "reasoning": "holds",
                    },
                )
                # The person approves in their own terminal (`trainsleuth approve`); the server's stderr only
                # says that a decision waits, never the code.
                out = await d.approve(iid)
                assert out["path"] == "terminal" and "pid" in out["diagnosis"]["approval"]["channel"]
                assert "One-time code" not in errlog.read_text()
                await d.ok("begin_fix", {"investigation_id": iid, "description": "lr 1"})
                procs = _server_processes(ws)
                assert procs, "the stdio server process was not found"
                for proc in procs:
                    proc.send_signal(signal.SIGKILL)
                for proc in procs:
                    proc.wait(timeout=30)
                killed = True
    except Exception:
        # The client notices its server vanished; that is the point of this test.
        if not killed:
            raise
    assert killed

    # Mid-attempt after the kill, edits stay allowed by the gate, and the user edits the file.
    assert edit_gate_status(ws).allowed
    (ws / "train.py").write_text("lr = 1\n")

    async with Client(stdio_params(ws)) as c:
        d = Driver(c)
        listed = await d.ok("list_investigations", {})
        assert [i["id"] for i in listed["investigations"]] == [iid]
        inv = await d.get(iid)
        assert inv["phase"] == "fixing" and len(inv["attempts"]) == 1
        # Guarantee 4 over stdio: resolved only by a passing reproducer run.
        v = await d.ok("verify_fix", {"investigation_id": iid})
        assert v["passed"] and v["phase"] == "resolved" and v["attempt"]["changed_files"] == ["train.py"]
        closed = await d.ok(
            "capture_knowledge",
            {
                "investigation_id": iid,
                "lessons": ["check lr"],
                "no_new_knowledge": True,
                "no_knowledge_reason": "known",
            },
        )
        assert Path(closed["rca_path"]).is_file()
        inv = await d.get(iid)
        kinds = [e["kind"] for e in inv["timeline"]]
        assert kinds.index("fix_begun") < kinds.index("resolved") < kinds.index("closed")


async def test_elicitation_only_server_over_stdio(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    asked: list[str] = []

    async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(
            action="accept", content={"decision": "approve", "comment": "ok", "name": "Ann"}
        )

    async with Client(stdio_params(ws, "--elicitation-only"), elicitation_callback=approve) as c:
        d = Driver(c)
        iid = await d.start(reproducer=REPRO, pathway="full")
        ev = await d.evidence(iid)
        await d.full_hypotheses(iid, ev)
        await d.ok("submit_diagnosis", d.diagnosis(iid, ev))
        out = await d.ok("approve_diagnosis", {"investigation_id": iid})
        assert out["path"] == "elicitation" and len(asked) == 1
        # Guarantee 5 over stdio: three failed attempts halt the investigation.
        for n in (1, 2, 3):
            await d.ok("begin_fix", {"investigation_id": iid, "description": f"try {n}"})
            (ws / "train.py").write_text(f"lr = {n + 1}\n")
            v = await d.ok("verify_fix", {"investigation_id": iid, "revert": True})
            assert not v["passed"] and v["strikes"] == n
        assert v["phase"] == "halted" and "Three-strike report" in v["three_strike_report"]
        await d.refused("begin_fix", {"investigation_id": iid, "description": "again"}, "three strikes")
        assert (ws / "train.py").read_text() == "lr = 10\n"
    async with Client(stdio_params(ws, "--elicitation-only")) as c:  # no elicitation: the fallback is refused
        d = Driver(c)
        iid2 = await d.start(
            symptom="eval accuracy is stuck at chance", reproducer="grep -q '^lr = 2$' train.py"
        )
        ev = await d.evidence(iid2)
        await d.ok("submit_diagnosis", d.diagnosis(iid2, ev))
        await d.refused(
            "approve_diagnosis", {"investigation_id": iid2, "approver": "A", "words": "w"}, "only through"
        )

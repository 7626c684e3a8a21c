"""Attacks on "approval comes from the person" (issue 15.2, 15.7), through real servers over stdio, the real
`trainsleuth client` CLI and real elicitation clients."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from protocol_attack_helpers import TRAINSLEUTH, edit, stdio_session
from test_protocol_helpers import (
    CODE,
    Driver,
    approve_in_terminal,
    in_a_terminal,
    make_repo,
    server_with_person,
    text_of,
)

pytestmark = pytest.mark.anyio

REPRO = "grep -q '^lr = 1$' train.py"


def client_call(ws: Path, tool: str, **args: Any) -> subprocess.CompletedProcess[str]:
    """The assistant runs `trainsleuth client call ...` in its shell: a second server of its own."""
    return subprocess.run(
        [
            TRAINSLEUTH,
            "client",
            "call",
            tool,
            "--workspace",
            str(ws),
            "--args-json",
            json.dumps(args),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ws,
    )


async def test_the_assistant_cannot_approve_on_its_own(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    log = tmp_path / "server-stderr.txt"
    async with stdio_session(ws, log=log) as d:
        iid = await d.start(reproducer=REPRO)
        ev = await d.evidence(iid)
        await d.ok("submit_diagnosis", d.diagnosis(iid, ev))
        # Attack 1: the old fallback, "a person's name and their words", made up by the assistant.
        r = await d.c.call_tool(
            "approve_diagnosis", {"investigation_id": iid, "approver": "Ann", "words": "yes"}
        )
        assert r.is_error and "trainsleuth approve" in text_of(r)
        # Attack 2: guess codes.
        for guess in ("0000-0000", "1234-5678"):
            r = await d.c.call_tool("approve_diagnosis", {"investigation_id": iid, "code": guess})
            assert r.is_error and "wrong" in text_of(r)
        # Attack 3: a second server of its own through the CLI, reading that server's stderr.
        proc = client_call(ws, "approve_diagnosis", investigation_id=iid, approver="Ann", words="approved")
        assert proc.returncode == 3 and "trainsleuth approve" in proc.stdout
        assert not CODE.search(proc.stdout + proc.stderr)
        assert not CODE.search(log.read_text())  # nor on the real server's stderr
        # Attack 4: run the person's command from the assistant's shell (no terminal there).
        refused = subprocess.run(
            [TRAINSLEUTH, "approve", "--workspace", str(ws)], input="Ann\napprove\nok\n",
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert refused.returncode == 2 and "own terminal" in refused.stderr
        inv = await d.get(iid)
        assert inv["phase"] == "diagnosis" and not edit(ws)["allowed"]
        # The person, in their own terminal, sees exactly what they approve and decides.
        shown = approve_in_terminal(ws)
        assert "learning rate 10 is far too high" in shown and REPRO in shown
        out = await d.ok("approve_diagnosis", {"investigation_id": iid})
        approval = out["diagnosis"]["approval"]
        assert out["path"] == "terminal" and approval["approver"] == "Ann"
        # Who drove that terminal is on the record (here: this test's Python, standing in for the person).
        assert "trainsleuth approve" in approval["channel"] and "started by" in approval["channel"]


async def test_a_code_approves_one_decision_only(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n", "data.py": "n = 1\n"})
    server, _, person = server_with_person(ws)
    from mcp import Client

    async with Client(server) as c:
        d = Driver(c, person)
        first = await d.start(reproducer=REPRO)
        ev = await d.evidence(first)
        await d.ok("submit_diagnosis", d.diagnosis(first, ev))
        code_first = person.code()
        second = await d.start(
            symptom="data loader yields empty batches", reproducer="grep -q 'n = 2' data.py"
        )
        ev2 = await d.evidence(second, "n is 1")
        await d.ok(
            "submit_diagnosis",
            d.diagnosis(
                second, ev2, root_cause="n is 1", proposed_fix={"files": ["data.py"], "change": "n = 2"}
            ),
        )
        # Attack: the code the person gave for one diagnosis, used on another.
        await d.refused("approve_diagnosis", {"investigation_id": second, "code": code_first}, "wrong")
        # Five wrong tries withdraw a code.
        for _ in range(4):
            await d.refused("approve_diagnosis", {"investigation_id": second, "code": "1111-2222"}, "wrong")
        await d.refused(
            "approve_diagnosis", {"investigation_id": second, "code": person.code()}, "no approval code"
        )
        out = await d.ok("approve_diagnosis", {"investigation_id": first, "code": code_first})
        assert out["path"] == "one_time_code"
        # A used code does not work twice.
        await d.refused("approve_diagnosis", {"investigation_id": first, "code": code_first}, "verify_fix")


async def test_a_second_server_obeys_the_workspace_approval_policy(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    asked: list[str] = []

    async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "approve", "name": "Ann"})

    async with stdio_session(ws, "--elicitation-only", elicitation_callback=person) as d:
        iid = await d.start(reproducer=REPRO)
        ev = await d.evidence(iid)
        await d.ok("submit_diagnosis", d.diagnosis(iid, ev))
        # Attack: a second server started by the assistant without --elicitation-only, which offers codes.
        proc = client_call(ws, "approve_diagnosis", investigation_id=iid)
        assert proc.returncode == 3 and "only through elicitation" in proc.stdout + proc.stderr
        assert "One-time code" not in proc.stderr  # it did not even show one
        assert (await d.get(iid))["phase"] == "diagnosis"
        out = await d.ok("approve_diagnosis", {"investigation_id": iid})
        assert out["path"] == "elicitation" and len(asked) == 1


async def test_an_assistant_written_elicitation_client_is_recorded(tmp_path: Path) -> None:
    """Elicitation is the client's dialog, so a client the assistant wrote itself can answer it: that is not
    prevented; it is recorded (path and client name) and shown in get_investigation."""
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})

    async def self_answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"decision": "approve", "name": "Ann"})

    async with stdio_session(
        ws,
        elicitation_callback=self_answer,
        client_info=types.Implementation(name="homemade-client", version="0.1"),
    ) as d:
        iid = await d.start(reproducer=REPRO)
        ev = await d.evidence(iid)
        await d.ok("submit_diagnosis", d.diagnosis(iid, ev))
        out = await d.ok("approve_diagnosis", {"investigation_id": iid})
        assert out["diagnosis"]["approval"]["client"] == "homemade-client 0.1"
        text = text_of(await d.c.call_tool("get_investigation", {"investigation_id": iid}))
        assert "approved by Ann via elicitation, client homemade-client 0.1" in text


async def test_newlines_cannot_spoof_lines_of_the_approval_dialog(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    seen: list[str] = []

    async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action="decline")

    async with stdio_session(ws, elicitation_callback=person) as d:
        iid = await d.start(reproducer=REPRO)
        ev = await d.evidence(iid)
        # Attack: fields that carry fake dialog lines (and a terminal escape that would hide text).
        spoof = (
            "lr too high\n\nProposed fix: a one-line change to train.py\nFiles the fix may change (nothing else): "
            "train.py\x1b[8m hidden"
        )
        await d.ok(
            "submit_diagnosis",
            d.diagnosis(
                iid,
                ev,
                root_cause=spoof,
                proposed_fix={"files": ["train.py"], "change": "rewrite the optimizer\rConfidence: 1.00"},
            ),
        )
        await d.ok("approve_diagnosis", {"investigation_id": iid})
    (dialog,) = seen
    lines = dialog.splitlines()
    assert sum(line.startswith("Proposed fix:") for line in lines) == 1
    assert sum(line.startswith("Files the fix may change") for line in lines) == 1
    assert sum(line.startswith("Confidence:") for line in lines) == 1
    assert "\x1b" not in dialog and "\r" not in dialog
    assert "    | Proposed fix: a one-line change to train.py" in lines
    assert "    | Confidence: 1.00" in lines


def test_the_person_can_decline_in_the_terminal(tmp_path: Path) -> None:
    """`trainsleuth approve` shows pending requests only in a terminal; rejecting there sends it back."""
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    started = client_call(
        ws,
        "start_investigation",
        symptom="loss NaN",
        reproducer=REPRO,
        reproducible="always",
        what_changed="lr 10",
    )
    iid = json.loads(started.stdout)["structured"]["investigation_id"]
    ev = json.loads(client_call(ws, "record_evidence", investigation_id=iid, summary="lr is 10").stdout)[
        "structured"
    ]["evidence_id"]
    diag = {
        "investigation_id": iid,
        "symptom": "NaN",
        "root_cause": "lr 10",
        "evidence_ids": [ev],
        "mechanism": "overshoot",
        "proposed_fix": {"files": ["train.py"], "change": "lr 1"},
        "confidence": 0.9,
        "disproving_observation": "NaN with lr 1",
    }
    proc = client_call(ws, "submit_diagnosis", **diag)
    assert proc.returncode == 0 and "trainsleuth approve" in proc.stdout, proc.stdout + proc.stderr
    code, shown = in_a_terminal(
        [TRAINSLEUTH, "approve", "--workspace", str(ws)], "Bo\nreject\nlook at the data first\n", ws
    )
    assert code == 0 and "lr 10" in shown and "Recorded: reject" in shown
    out = client_call(ws, "approve_diagnosis", investigation_id=iid)
    result = json.loads(out.stdout)["structured"]
    assert result["decision"] == "reject" and result["phase"] == "hypotheses" and result["path"] == "terminal"
    assert result["diagnosis"]["approval"]["words"] == "look at the data first"
    assert sys.executable

"""approve_diagnosis waits a while for the person's answer in their terminal, so the assistant does not
sleep blind and ask again (found in the blind agent benchmark: assistants slept 60-90 s for an answer
that came in 4)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from protocol_attack_helpers import TRAINSLEUTH, stdio_session
from test_protocol_helpers import approve_in_terminal, make_repo

pytestmark = pytest.mark.anyio

REPRO = "grep -q '^lr = 1$' train.py"


def approve_call(ws: Path, iid: str, wait_s: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRAINSLEUTH_APPROVAL_WAIT_S": wait_s}
    return subprocess.run(
        [TRAINSLEUTH, "client", "call", "approve_diagnosis", "--workspace", str(ws),
         "--args-json", json.dumps({"investigation_id": iid}), "--json"],
        capture_output=True, text=True, timeout=180, cwd=ws, env=env,
    )  # fmt: skip


async def test_approve_waits_for_the_person_in_their_terminal(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    async with stdio_session(ws) as d:
        iid = await d.start(reproducer=REPRO)
        ev = await d.evidence(iid)
        await d.ok("submit_diagnosis", d.diagnosis(iid, ev))

        # Nobody answers: the call says how long it waited and how the person decides.
        started = time.monotonic()
        alone = approve_call(ws, iid, "1")
        assert alone.returncode == 3 and "no decision came within 1 s" in alone.stdout
        assert "trainsleuth approve" in alone.stdout
        assert time.monotonic() - started >= 1

        # The person answers a few seconds after the assistant asked: the same call returns the approval.
        shown: list[str] = []
        person = threading.Timer(3.0, lambda: shown.append(approve_in_terminal(ws)))
        person.start()
        try:
            waited = approve_call(ws, iid, "90")
        finally:
            person.join()
        assert waited.returncode == 0, waited.stdout + waited.stderr
        out = json.loads(waited.stdout)["structured"]
        assert out["path"] == "terminal" and out["decision"] == "approve"
        assert REPRO in shown[0]
        assert (await d.get(iid))["phase"] == "fixing"  # approval begins the first attempt

"""The kept server of `trainsleuth client` (issue 27.4) is no way around the person: it runs in a session of
its own (no terminal, so it shows nobody a code), its log holds no code, a call still cannot approve by
itself, and the person's decision in their own terminal is what it takes. Real CLI, real kept server, the
person in a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest
from protocol_attack_helpers import TRAINSLEUTH
from test_protocol_helpers import CODE, approve_in_terminal, make_repo

from trainsleuth.clients import keep

REPRO = "grep -q '^lr = 1$' train.py"


def assistant(ws: Path, tool: str, **args: Any) -> subprocess.CompletedProcess[str]:
    """What the assistant runs in its shell (no terminal), through the workspace's kept server."""
    env = {**os.environ, keep.KEEP_ENV: "1"}
    return subprocess.run(
        [TRAINSLEUTH, "client", "call", tool, "--workspace", str(ws), "--args-json", json.dumps(args), "--json"],
        capture_output=True, text=True, timeout=180, cwd=ws, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def structured(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dict(json.loads(proc.stdout)["structured"])


@pytest.fixture
def ws(tmp_path: Path) -> Any:
    folder = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    yield folder
    subprocess.run([TRAINSLEUTH, "client", "stop", "--all"], capture_output=True, timeout=60)


def test_the_kept_server_cannot_approve_and_shows_no_code(ws: Path) -> None:
    iid = structured(
        assistant(ws, "start_investigation", symptom="loss NaN after the lr change", reproducible="always",
                  what_changed="lr 1 -> 10", reproducer=REPRO)
    )["investigation_id"]  # fmt: skip
    ev = structured(assistant(ws, "record_evidence", investigation_id=iid, summary="lr is 10"))["evidence_id"]
    diag = {
        "investigation_id": iid, "symptom": "NaN", "root_cause": "lr 10 is too high", "evidence_ids": [ev],
        "mechanism": "updates overshoot", "proposed_fix": {"files": ["train.py"], "change": "lr = 1"},
        "confidence": 0.9, "disproving_observation": "NaN with lr 1",
    }  # fmt: skip
    submitted = assistant(ws, "submit_diagnosis", **diag)
    assert "trainsleuth approve" in structured(submitted)["approval_note"]
    (server,) = [
        p
        for p in psutil.process_iter(["cmdline"])
        if "unix" in (p.info["cmdline"] or []) and str(ws) in (p.info["cmdline"] or [])
    ]
    assert server.terminal() is None  # its own session: no terminal to show a code on
    # The assistant asks it to approve: refused, pointing at the person's terminal; no code anywhere.
    for attempt in ({}, {"approver": "Ann", "words": "yes"}, {"code": "1234-5678"}):
        refused = assistant(ws, "approve_diagnosis", investigation_id=iid, **attempt)
        assert refused.returncode == 3, refused.stdout
        assert not CODE.search(refused.stdout + refused.stderr)
    assert "trainsleuth approve" in assistant(ws, "approve_diagnosis", investigation_id=iid).stdout
    (log,) = keep.runtime_dir().glob("*.log")
    assert not CODE.search(log.read_text())
    # The person decides in their own terminal; the kept server takes that decision.
    shown = approve_in_terminal(ws)
    assert REPRO in shown
    out = structured(assistant(ws, "approve_diagnosis", investigation_id=iid))
    assert out["path"] == "terminal" and out["decision"] == "approve"

"""The smaller items of issue 15.7 in the protocol's files, each attacked for real: the RCA document written
through a planted symlink, a reproducer orphaned by a killed server, snapshot temp files left in /tmp, and
bad arguments logged as "a trainsleuth bug"."""

from __future__ import annotations

import datetime as dt
import os
import signal
import time
from pathlib import Path

import anyio
import psutil
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client
from protocol_attack_helpers import stdio_session
from test_protocol_helpers import Driver, make_repo, server_with_person, stdio_params, text_of

from trainsleuth.protocol.rca import rca_filename
from trainsleuth.state.store import default_state_path

pytestmark = pytest.mark.anyio

REPRO = "grep -q '^lr = 1$' train.py"


async def test_the_rca_is_never_written_through_a_planted_symlink(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer=REPRO, symptom="loss is NaN")
        await d.approved(iid)
        await d.ok("begin_fix", {"investigation_id": iid, "description": "lr 1"})
        (ws / "train.py").write_text("lr = 1\n")
        assert (await d.ok("verify_fix", {"investigation_id": iid}))["passed"]
        # Attack 1: the RCA folder is a symlink out of the workspace.
        rca_dir = ws / ".trainsleuth" / "rca"
        rca_dir.symlink_to(tmp_path, target_is_directory=True)
        args = {"investigation_id": iid, "no_new_knowledge": True, "no_knowledge_reason": "known"}
        await d.refused("capture_knowledge", args, "outside the workspace")
        rca_dir.unlink()
        # Attack 2: the document's predictable name is a symlink to a file outside, and so is the old
        # temporary name.
        rca_dir.mkdir()
        today = dt.datetime.now(dt.timezone.utc).date().isoformat()
        name = rca_filename(today, "loss is NaN", iid)
        (rca_dir / name).symlink_to(outside)
        (rca_dir / (name.removesuffix(".md") + ".md.tmp")).symlink_to(outside)
        out = await d.ok("capture_knowledge", args)
        rca = Path(out["rca_path"])
        assert rca.parent == rca_dir and not rca.is_symlink() and "Root-cause analysis" in rca.read_text()
        assert outside.read_text() == "precious\n"


async def test_a_reproducer_does_not_outlive_a_killed_server(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    pid_file = tmp_path / "reproducer.pid"
    slow = f"echo $$ > {pid_file}; sleep 120; exit 1"
    with (tmp_path / "stderr.txt").open("w") as err:
        try:
            async with Client(stdio_client(stdio_params(ws), errlog=err)) as c:
                d = Driver(c)
                iid = await d.start(reproducer=slow, reproducer_timeout_s=600)
                ev = await d.evidence(iid)

                async def submit() -> None:
                    await c.call_tool("submit_diagnosis", d.diagnosis(iid, ev))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(submit)
                    deadline = time.monotonic() + 120
                    while not pid_file.exists() and time.monotonic() < deadline:
                        await anyio.sleep(0.1)
                    servers = [
                        p
                        for p in psutil.Process().children(recursive=True)
                        if "serve" in p.cmdline() and str(ws) in p.cmdline()
                    ]
                    assert servers and pid_file.exists()
                    for p in servers:
                        p.send_signal(signal.SIGKILL)  # no cleanup handler runs
                    tg.cancel_scope.cancel()
        except Exception:
            pass  # the client notices its server died
    reproducer = int(pid_file.read_text())
    deadline = time.monotonic() + 15
    while psutil.pid_exists(reproducer) and time.monotonic() < deadline:
        try:
            if psutil.Process(reproducer).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    alive = psutil.pid_exists(reproducer) and psutil.Process(reproducer).status() != psutil.STATUS_ZOMBIE
    assert not alive, "the reproducer outlived the server that started it"


async def test_snapshots_leave_nothing_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    # A snapshot folder a killed server left behind, an hour and more ago.
    state_tmp = default_state_path(ws).parent / "tmp"
    stale = state_tmp / "snapshot-killed"
    stale.mkdir(parents=True)
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    async with stdio_session(ws) as d:
        iid = await d.start(reproducer=REPRO)
        await d.approved(iid)
        await d.ok("begin_fix", {"investigation_id": iid, "description": "lr 1"})
        (ws / "train.py").write_text("lr = 1\n")
        assert (await d.ok("verify_fix", {"investigation_id": iid}))["passed"]
    assert not list(private_tmp.glob("*snapshot*"))
    assert not stale.exists() and not list(state_tmp.glob("snapshot-*"))


async def test_bad_arguments_are_not_reported_as_trainsleuth_bugs(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    log = tmp_path / "stderr.txt"
    async with stdio_session(ws, log=log) as d:
        iid = await d.start(reproducer=REPRO)
        ev = await d.evidence(iid)
        bad = [
            ("submit_diagnosis", d.diagnosis(iid, ev, proposed_fix={"files": ["train.py"]})),
            ("submit_diagnosis", d.diagnosis(iid, ev, confidence=7)),
            (
                "record_review",
                {"investigation_id": iid, "verdict": "MAYBE", "reviewer": "r", "reasoning": "x"},
            ),
            ("propose_hypotheses", {"investigation_id": iid, "hypotheses": [{"statement": "s"}] * 3}),
        ]
        for tool, args in bad:
            r = await d.c.call_tool(tool, args)
            assert r.is_error, (tool, text_of(r))
            assert "trainsleuth bug" not in text_of(r)
    assert "trainsleuth bug" not in log.read_text() and "failed unexpectedly" not in log.read_text()

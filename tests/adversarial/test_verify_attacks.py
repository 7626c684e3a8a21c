"""Attacks on "only a verified fix resolves" (issue 15.1, 15.5), through a real `trainsleuth serve` over stdio,
real git, real pytest and a real virtual environment. Each attack is written first; the defence is the
assertion that follows it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from protocol_attack_helpers import edit, stdio_session
from test_protocol_helpers import make_repo

pytestmark = pytest.mark.anyio

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider tests/test_lr.py"
FILES = {
    "train.py": "lr = 10\n",
    "tests/test_lr.py": "import train\n\n\ndef test_lr_is_one():\n    assert train.lr == 1\n",
    "pytest.ini": "[pytest]\npythonpath = .\n",
    ".gitignore": ".venv/\nconftest.py\n",
}


async def test_a_reproducer_that_does_not_fail_is_refused(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", FILES)
    async with stdio_session(ws) as d:
        iid = await d.start(reproducer="true")
        ev = await d.evidence(iid)
        # Attack: a reproducer that always passes, so "verify" would resolve with zero changes.
        await d.refused("submit_diagnosis", d.diagnosis(iid, ev), "does not reproduce", "passed")
        # Attack: the same, given in the diagnosis itself.
        await d.refused("submit_diagnosis", d.diagnosis(iid, ev, reproducer="exit 0"), "does not reproduce")
        inv = await d.get(iid)
        assert inv["phase"] == "investigating" and inv["diagnoses"] == []
        ran = [e for e in inv["evidence"] if e["source"] == "submit_diagnosis"]
        assert len(ran) == 2 and all("passed" in e["summary"] for e in ran)
        assert not edit(ws)["allowed"]


async def test_changing_the_test_or_its_configuration_does_not_resolve(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", FILES)
    async with stdio_session(ws) as d:
        iid = await d.start(reproducer=PYTEST)
        await d.approved(iid)
        await d.ok("begin_fix", {"investigation_id": iid, "description": "lr back to 1"})
        person = d.person
        assert person is not None

        # Attack 1: weaken the test the reproducer runs instead of fixing the code.
        test_file = ws / "tests" / "test_lr.py"
        test_file.write_text("import train\n\n\ndef test_lr_is_one():\n    assert True\n")
        v = await d.ok("verify_fix", {"investigation_id": iid})
        assert v["attempt"]["exit_code"] == 0 and not v["passed"] and v["phase"] == "fixing"
        assert v["attempt"]["unapproved"] == ["tests/test_lr.py"] and v["strikes"] == 0
        # The assistant cannot approve the change itself; the person sees the diff and says no.
        await d.refused(
            "approve_diagnosis",
            {"investigation_id": iid, "approver": "me", "words": "ok"},
            "trainsleuth approve",
        )
        person.decide_in_terminal("reject")
        assert "-    assert train.lr == 1" in person.seen[-1] and "+    assert True" in person.seen[-1]
        out = await d.ok("approve_diagnosis", {"investigation_id": iid})
        assert (
            out["decision"] == "reject"
            and out["amendment"] == ["tests/test_lr.py"]
            and out["phase"] == "fixing"
        )
        test_file.write_text(FILES["tests/test_lr.py"])

        # Attack 2: a git-ignored conftest.py that patches the code under test.
        (ws / "conftest.py").write_text("import train\n\ntrain.lr = 1\n")
        v = await d.ok("verify_fix", {"investigation_id": iid})
        assert v["attempt"]["exit_code"] == 0 and not v["passed"]
        assert v["attempt"]["unapproved"] == ["conftest.py"]
        (ws / "conftest.py").unlink()

        # Attack 3: the test configuration (tracked) puts a shadow copy of the code first on the path.
        (ws / "shadow").mkdir()
        (ws / "shadow" / "train.py").write_text("lr = 1\n")
        (ws / "pytest.ini").write_text("[pytest]\npythonpath = shadow .\n")
        v = await d.ok("verify_fix", {"investigation_id": iid})
        assert v["attempt"]["exit_code"] == 0 and not v["passed"]
        assert sorted(v["attempt"]["unapproved"]) == ["pytest.ini", "shadow/train.py"]
        (ws / "pytest.ini").write_text(FILES["pytest.ini"])
        (ws / "shadow" / "train.py").unlink()
        (ws / "shadow").rmdir()

        # The honest fix resolves.
        (ws / "train.py").write_text("lr = 1\n")
        v = await d.ok("verify_fix", {"investigation_id": iid})
        assert v["passed"] and v["phase"] == "resolved" and v["attempt"]["unapproved"] == []
        inv = await d.get(iid)
        kinds = [e["kind"] for e in inv["timeline"]]
        assert kinds.count("not_resolved") == 3 and "resolved" in kinds


async def test_a_pth_file_in_a_git_ignored_venv_is_caught(tmp_path: Path) -> None:
    ws = make_repo(
        tmp_path / "ws",
        {"train.py": "lr = 10\n", "check.py": "import sys, train\nsys.exit(0 if train.lr == 1 else 1)\n",
         ".gitignore": ".venv/\n"},
    )  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(ws / ".venv")], check=True, timeout=120
    )
    async with stdio_session(ws) as d:
        iid = await d.start(reproducer=".venv/bin/python check.py")
        await d.approved(iid)
        await d.ok("begin_fix", {"investigation_id": iid, "description": "lr back to 1"})
        # Attack: a .pth file in the project's (git-ignored) environment makes every Python exit 0 at start.
        (site,) = (ws / ".venv" / "lib").glob("python*/site-packages")
        (site / "zz_ok.pth").write_text("import os; os._exit(0)\n")
        v = await d.ok("verify_fix", {"investigation_id": iid})
        assert v["attempt"]["exit_code"] == 0 and not v["passed"]
        assert any("zz_ok.pth" in f and "environment" in f for f in v["attempt"]["unapproved"])
        (site / "zz_ok.pth").unlink()
        (ws / "train.py").write_text("lr = 1\n")
        v = await d.ok("verify_fix", {"investigation_id": iid})
        assert v["passed"], v["attempt"]["unapproved"]


async def test_concurrent_verifications_cannot_race(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    slow = "sleep 2; grep -q '^lr = 1$' train.py"
    log = tmp_path / "stderr.txt"
    async with stdio_session(ws, log=log) as d:
        iid = await d.start(reproducer=slow)
        await d.approved(iid)
        await d.ok("begin_fix", {"investigation_id": iid, "description": "lr back to 1"})
        (ws / "train.py").write_text("lr = 1\n")
        results: list[tuple[bool, str]] = []
        # Attack: two verify_fix calls at once, from this server and from a second server on the workspace;
        # one of them asks to revert.
        async with stdio_session(ws, log=log) as other:

            async def verify(driver: object, revert: bool) -> None:
                r = await driver.c.call_tool("verify_fix", {"investigation_id": iid, "revert": revert})  # type: ignore[attr-defined]
                results.append((bool(r.is_error), r.content[0].text))  # type: ignore[union-attr]

            async with anyio.create_task_group() as tg:
                tg.start_soon(verify, d, False)
                tg.start_soon(verify, other, True)
        ok = [text for failed, text in results if not failed]
        refused = [text for failed, text in results if failed]
        assert len(ok) == 1 and "PASSED" in ok[0]
        assert len(refused) == 1 and (
            "already running" in refused[0]
            or "no active fix attempt" in refused[0]
            or "still running as job" in refused[0]  # the second call saw the first one's job
        )
        inv = await d.get(iid)
        assert inv["phase"] == "resolved" and [a["status"] for a in inv["attempts"]] == ["passed"]
        assert (ws / "train.py").read_text() == "lr = 1\n"  # the passing fix was not reverted

"""Attacks on the investigation state (issue 15.3): edited with sqlite3, deleted, replaced, shadowed by a decoy,
its key removed, the workspace copied, a bisect command that edits it. Real servers, real sqlite, the real
hook command (`trainsleuth hook claude-code`) and real git."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from protocol_attack_helpers import TRAINSLEUTH, edit, hook, stdio_session
from test_protocol_helpers import in_a_terminal, make_repo

from trainsleuth.state import seal
from trainsleuth.state.location import legacy_db, marker_path
from trainsleuth.state.store import default_state_path

pytestmark = pytest.mark.anyio

REPRO = "grep -q '^lr = 1$' train.py"


async def _open_investigation(ws: Path) -> str:
    async with stdio_session(ws) as d:
        iid = await d.start(reproducer=REPRO)
        await d.evidence(iid)
    return iid


async def test_editing_the_state_with_sqlite_closes_everything(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    iid = await _open_investigation(ws)
    assert not edit(ws)["allowed"]
    db = default_state_path(ws)
    assert ws not in db.parents  # the state is not in the workspace at all
    # Attack: open the real database with sqlite and say a fix attempt is active (the gate would open).
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE investigations SET phase = 'fixing' WHERE id = ?", (iid,))
    answer = edit(ws)
    assert not answer["allowed"] and "do not match its seal" in answer["reason"]
    async with stdio_session(ws) as d:
        text = await d.refused("get_investigation", {"investigation_id": iid}, "altered outside trainsleuth")
        assert "trainsleuth state accept" in text
        await d.refused(
            "begin_fix", {"investigation_id": iid, "description": "x"}, "altered outside trainsleuth"
        )
    # The assistant cannot accept it from its shell; the person can, in their terminal.
    proc = subprocess.run(
        [TRAINSLEUTH, "state", "accept", "--workspace", str(ws)], capture_output=True, text=True
    )
    assert proc.returncode == 2 and not edit(ws)["allowed"]
    code, shown = in_a_terminal([TRAINSLEUTH, "state", "accept", "--workspace", str(ws)], "accept\n", ws)
    assert code == 0 and "Accepted and sealed" in shown
    async with stdio_session(ws) as d:
        inv = await d.get(iid)
        assert any(e["kind"] == "state_accepted" for e in inv["timeline"])  # on the record


async def test_deleting_or_replacing_the_state_closes_the_gate(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    await _open_investigation(ws)
    db = default_state_path(ws)
    saved = tmp_path / "saved.db"
    shutil.copy2(db, saved)
    # Attack: delete the state (and its WAL files).
    for f in db.parent.glob("state.db*"):
        f.unlink()
    answer = edit(ws)
    assert not answer["allowed"] and "missing" in answer["reason"]
    # A server does not silently start a fresh, empty state in its place.
    async with stdio_session(ws) as d:
        await d.refused("list_investigations", {}, "missing or empty")
    assert not edit(ws)["allowed"]
    # Attack: replace it with an empty database, then with a database without a seal.
    for f in db.parent.glob("state.db*"):
        f.unlink()
    sqlite3.connect(db).close()
    assert "replaced" in edit(ws)["reason"]
    db.unlink()
    shutil.copy2(saved, db)
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM seal")
    assert "no seal" in edit(ws)["reason"]
    # Attack: remove the signing key (then every seal is unverifiable).
    shutil.copy2(saved, db)
    seal.key_path().unlink()
    assert "signing key" in edit(ws)["reason"]


async def test_a_decoy_state_in_a_subfolder_does_not_shadow_the_workspace(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n", "pkg/model.py": "x = 1\n"})
    await _open_investigation(ws)
    # Attack: an empty (old-style) state database in a subfolder, so the hook finds it first.
    decoy = legacy_db(ws / "pkg")
    decoy.parent.mkdir()
    sqlite3.connect(decoy).close()
    answer = edit(ws, "pkg/model.py")
    assert not answer["allowed"] and "without an approved diagnosis" in answer["reason"]
    # The same through the Bash tool, from inside the subfolder.
    answer = hook(ws, "Bash", {"command": "echo 'x = 2' > model.py"}, cwd=ws / "pkg")
    assert not answer["allowed"]


async def test_a_bisect_command_that_edits_the_state_is_detected(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "second"], cwd=ws, check=True)
    db = default_state_path(ws)
    attack = (
        f"python3 -c \"import sqlite3; c = sqlite3.connect('{db}'); "
        "c.execute('UPDATE investigations SET phase = \\'fixing\\''); c.commit()\"; exit 0"
    )
    async with stdio_session(ws) as d:
        iid = await d.start(reproducer=REPRO)
        # Attack: a bisect whose test command rewrites the state through its real path.
        r = await d.c.call_tool(
            "bisect_commits",
            {"repo": str(ws), "good": "HEAD~1", "bad": "HEAD", "command": attack},
        )
        assert r is not None
        await d.refused("get_investigation", {"investigation_id": iid}, "altered outside trainsleuth")
    assert "seal" in edit(ws)["reason"]


async def test_an_old_in_workspace_state_is_migrated_not_lost(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    iid = await _open_investigation(ws)
    # An existing user's layout: the database inside the workspace, written by an older trainsleuth.
    db = default_state_path(ws)
    legacy = legacy_db(ws)
    with sqlite3.connect(db) as src, sqlite3.connect(legacy) as dst:
        src.backup(dst)
    with sqlite3.connect(legacy) as conn:
        conn.execute("DROP TABLE seal")
        conn.execute("DROP TABLE settings")
        conn.execute("DROP TABLE person_requests")
        conn.execute("DROP TABLE problems")
        conn.execute("DROP TABLE counters")
        conn.execute("UPDATE schema_versions SET version = 1 WHERE component = 'protocol'")
    for f in db.parent.glob("state.db*"):
        f.unlink()
    marker_path(ws).unlink()
    assert not edit(ws)["allowed"]  # before the migration the gate reads the old database as it is
    async with stdio_session(ws) as d:
        inv = await d.get(iid)
        assert inv["phase"] == "investigating" and inv["evidence"]
        new = await d.evidence(iid, "after the migration")
        assert new.startswith("e")
    assert db.exists() and not legacy.exists()
    assert list(legacy.parent.glob("state.db.migrated-*"))  # the old file is kept, renamed
    assert not edit(ws)["allowed"]


async def test_a_copied_workspace_is_not_a_fresh_start(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    await _open_investigation(ws)
    # Attack: copy the repository elsewhere (marker included) and edit there.
    copy = tmp_path / "copy"
    shutil.copytree(ws, copy)
    answer = edit(copy)
    assert not answer["allowed"] and "copied or moved" in answer["reason"]
    marker = json.loads(marker_path(copy).read_text())
    assert marker["workspace"] == str(ws.resolve())

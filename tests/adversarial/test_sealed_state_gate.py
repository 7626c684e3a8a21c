"""The edit gate keeps the assistant out of the sealed state folder (issue 15.3, outside the workspace:
TRAINSLEUTH_STATE_DIR or ~/.local/state/trainsleuth), at every phase, by every route it parses: Edit
and Write paths, redirections, cp/mv/rm/sqlite3 operands (literal, through ~, a glob or a symlink),
and commands whose writes it cannot place (python -c, a $VARIABLE) that name the folder.

Each attack is run against a real workspace whose investigation state the real server wrote, once
where an investigation is open and once where none is (the gate otherwise lets every edit through),
through the hook the clients run. The defence is checked both ways: the same commands aimed at an
ordinary file in the ungoverned workspace are allowed, so the denials are about the state folder."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from hook_helpers import (
    STATE_ENV,
    claude_event,
    cursor_event,
    make_workspace,
    open_investigation,
    run_hook_process,
)

from trainsleuth.clients.hooks import run_hook
from trainsleuth.state.location import authoritative_db, marker_path


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two workspaces sharing one state root: `open` has an investigation, `free` has none."""
    base = tmp_path_factory.mktemp("sealed")
    root = base / "state-root"
    saved = os.environ.get(STATE_ENV)
    os.environ[STATE_ENV] = str(root)
    try:
        ws = make_workspace(base / "proj")
        open_investigation(ws)
        free = base / "free"
        free.mkdir()
        subprocess.run(["git", "init", "-q", str(free)], check=True)
        (free / "train.py").write_text("lr = 1\n")
        db = authoritative_db(ws)
    finally:
        if saved is None:
            del os.environ[STATE_ENV]
        else:
            os.environ[STATE_ENV] = saved
    assert db.is_file() and marker_path(ws).is_file()
    return {"root": root, "db": db, "open": ws, "free": free}


@pytest.fixture
def env(setting: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv(STATE_ENV, str(setting["root"]))
    return setting


# Bash commands that write the state ({db}: the workspace's state.db, {root}: the state root).
ATTACKS = [
    "echo x > {db}",
    "cat /dev/null >> {db}",
    "printf '' | tee {db}",
    "cp /tmp/evil.db {db}",
    "mv {db} /tmp/stolen.db",
    "rm -f {db}",
    "rm -rf {root}",
    "rm -rf {root}/*",
    "rm -rf {root}/workspaces/*/state.db",
    "rm -rf {parent}/state-r*",
    "truncate -s 0 {db}",
    "sqlite3 {db} 'DELETE FROM events'",
    "python -c \"import sqlite3; sqlite3.connect('{db}').execute('DELETE FROM events')\"",
    "python3 -c 'import os, shutil; shutil.rmtree(os.environ[\"TRAINSLEUTH_STATE_DIR\"])'",
    'rm -rf "$TRAINSLEUTH_STATE_DIR"',
    "D={root}; rm -rf $D",
    "cd {root} && rm -rf workspaces",
    "ln -s {root} st && echo x > st/signing.key",
    "bash -c 'echo x > {db}'",
    "find {root} -delete",
]


def _claude(ws: Path, tool: str, tool_input: dict[str, object]) -> str:
    out = run_hook("claude-code", claude_event(ws, tool, tool_input))
    if out.exit_code == 2:
        return "deny"
    if not out.stdout.strip():
        return "allow"
    return str(json.loads(out.stdout)["hookSpecificOutput"]["permissionDecision"])


@pytest.mark.parametrize("where", ["open", "free"])
@pytest.mark.parametrize("attack", ATTACKS)
def test_shell_writes_into_the_state_folder_are_denied(env: dict[str, Path], where: str, attack: str) -> None:
    command = attack.format(db=env["db"], root=env["root"], parent=env["root"].parent)
    out = run_hook("claude-code", claude_event(env[where], "Bash", {"command": command}))
    assert out.stdout.strip(), f"allowed: {command}"
    reason = json.loads(out.stdout)["hookSpecificOutput"]
    assert reason["permissionDecision"] == "deny", command
    assert "sealed investigation state" in reason["permissionDecisionReason"], reason


@pytest.mark.parametrize("where", ["open", "free"])
def test_edit_tools_cannot_write_the_state(env: dict[str, Path], where: str) -> None:
    ws = env[where]
    for tool, tool_input in [
        ("Write", {"file_path": str(env["db"]), "content": "x"}),
        ("Edit", {"file_path": str(env["root"] / "signing.key"), "old_string": "a", "new_string": "b"}),
        ("MultiEdit", {"file_path": str(env["db"].parent / "state.db-wal"), "edits": []}),
    ]:
        assert _claude(ws, tool, tool_input) == "deny", tool


def test_a_link_made_earlier_does_not_hide_the_state(env: dict[str, Path]) -> None:
    link = env["free"] / "notes"
    if not link.exists():
        os.symlink(env["root"], link)
    assert _claude(env["free"], "Write", {"file_path": str(link / "signing.key"), "content": "x"}) == "deny"
    assert _claude(env["free"], "Bash", {"command": "echo x > notes/signing.key"}) == "deny"


def test_the_default_per_user_folder_is_guarded_too(
    env: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server started without TRAINSLEUTH_STATE_DIR keeps the state under XDG_STATE_HOME (or
    ~/.local/state): the hook guards that folder whatever its own environment says."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    target = tmp_path / "xdg" / "trainsleuth" / "workspaces" / "k" / "state.db"
    assert _claude(env["free"], "Bash", {"command": f"rm -f {target}"}) == "deny"
    assert _claude(env["free"], "Bash", {"command": "rm -rf ~/.local/state/trainsleuth"}) == "deny"
    assert _claude(env["free"], "Bash", {"command": "rm -rf ~/.local/state"}) == "deny"


def test_cursor_and_windsurf_routes(env: dict[str, Path]) -> None:
    ws = env["free"]
    out = run_hook(
        "cursor", cursor_event(ws, "beforeShellExecution", command=f"rm -f {env['db']}", cwd=str(ws))
    )
    assert json.loads(out.stdout)["permission"] == "deny"
    event = {
        "agent_action_name": "pre_write_code",
        "tool_info": {"file_path": str(env["db"]), "cwd": str(ws)},
    }
    assert run_hook("windsurf", json.dumps(event)).exit_code == 2


def test_the_real_hook_command_denies_and_the_state_survives(env: dict[str, Path]) -> None:
    before = env["db"].read_bytes()
    payload = claude_event(env["free"], "Bash", {"command": f"sqlite3 {env['db']} 'DELETE FROM events'"})
    proc = run_hook_process("claude-code", payload)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert "sealed investigation state" in answer["permissionDecisionReason"]
    assert "get_investigation" in answer["permissionDecisionReason"]  # what to do instead
    assert env["db"].read_bytes() == before
    with sqlite3.connect(env["db"]) as conn:  # still a database with its events
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] > 0


# The defence is about the state folder, not writing in general: in a workspace without an
# investigation these stay allowed, and reading the state is never a write.
ALLOWED = [
    "echo x > notes.md",
    "cp train.py train_backup.py",
    "python -c \"print('hello')\"",
    "rm -f notes.md",
    "cat {db}",
    "ls -la {root}",
    "echo x > .trainsleuth/scratch/probe_entry.py",
    "cp notes.md ~",
]


@pytest.mark.parametrize("command", ALLOWED)
def test_ordinary_commands_stay_allowed(env: dict[str, Path], command: str) -> None:
    cmd = command.format(db=env["db"], root=env["root"])
    assert _claude(env["free"], "Bash", {"command": cmd}) == "allow", cmd


def test_a_name_that_merely_starts_like_the_state_folder_is_not_it(
    env: dict[str, Path], tmp_path: Path
) -> None:
    sibling = Path(str(env["root"]) + "-notes")
    sibling.mkdir(exist_ok=True)
    assert _claude(env["free"], "Bash", {"command": f"echo x > {sibling}/a.txt"}) == "allow"
    assert _claude(env["free"], "Bash", {"command": f"echo x > {env['root']}/a.txt"}) == "deny"

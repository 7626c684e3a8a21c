"""Issue 15's hook bypasses, driven through the real `trainsleuth hook CLIENT` command.

Each attack is the JSON a client writes on the hook's stdin, in a real git workspace with a real open
investigation (no approved diagnosis). Edit-tool payloads (Write, Edit, MultiEdit, NotebookEdit,
other MCP servers' write tools, Cursor's tools) are checked as well as shell commands.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hook_helpers import (
    STATE_ENV,
    claude_event,
    claude_verdict,
    cursor_event,
    make_workspace,
    open_investigation,
    run_hook_process,
    shared_workspace,
)

from trainsleuth.clients.hooks import run_hook
from trainsleuth.state.store import default_state_path

# The bypasses issue 15 lists (Bash tool input, no diagnosis approved), one command each.
ISSUE_ATTACKS = [
    "cp x.py src/",
    "git -C . checkout -- train.py",
    "git -c core.pager='sh -c \"cp /tmp/a train.py\"' log",
    "git reset --hard",
    "git checkout train.py",
    "cd /nonexistent; cp /tmp/a train.py",
    "(cd /tmp); rm train.py",
    "env rm train.py",
    "nice rm train.py",
    "timeout 5 rm train.py",
    "echo train.py | xargs rm",
    "F=train.py; echo x > $F",
    "ln -s ../train.py tests/helper.py",
    "python -c \"open('train.py', 'w').write('lr = 1e-3')\"",
    "bash -c 'echo x > train.py'",
    "eval 'echo x > train.py'",
    "echo x | tee train.py",
    "dd if=/tmp/a of=train.py",
]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    return shared_workspace(tmp_path_factory.mktemp("attacks"))


@pytest.fixture
def workspace(shared: tuple[Path, str, Path], monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    monkeypatch.setenv(STATE_ENV, str(shared[2]))
    return shared[0], shared[1]


@pytest.mark.parametrize("command", ISSUE_ATTACKS)
def test_issue_attacks_are_denied_by_the_real_hook(workspace: tuple[Path, str], command: str) -> None:
    ws, iid = workspace
    proc = run_hook_process("claude-code", claude_event(ws, "Bash", {"command": command}))
    assert claude_verdict(proc.stdout, proc.returncode) == "deny", (command, proc.stdout, proc.stderr)
    assert iid in proc.stdout


def test_cursor_shell_attacks_are_denied_by_the_real_hook(workspace: tuple[Path, str]) -> None:
    ws, iid = workspace
    for command in ("git -C . checkout -- train.py", "bash -c 'rm train.py'"):
        payload = cursor_event(ws, "beforeShellExecution", command=command, cwd=str(ws))
        proc = run_hook_process("cursor", payload)
        body = json.loads(proc.stdout)
        assert proc.returncode == 0 and body["permission"] == "deny" and iid in body["agent_message"]


EDIT_PAYLOADS: list[tuple[str, dict[str, object], str]] = [
    # (tool, input, expected): paths are relative to the workspace and made absolute below
    ("Write", {"file_path": "train.py", "content": "lr = 1e-3\n"}, "deny"),
    ("Edit", {"file_path": "train.py", "old_string": "10.0", "new_string": "1e-3"}, "deny"),
    ("MultiEdit", {"file_path": "model.py", "edits": [{"old_string": "a", "new_string": "b"}]}, "deny"),
    ("NotebookEdit", {"notebook_path": "analysis.ipynb", "new_source": "x = 1"}, "deny"),
    ("Write", {"content": "no path at all"}, "deny"),
    # links made before the investigation: the write lands on train.py
    ("Edit", {"file_path": "tests/ln.py", "old_string": "10.0", "new_string": "1e-3"}, "deny"),
    ("Write", {"file_path": "tests/hard.py", "content": "lr = 1e-3\n"}, "deny"),
    ("Write", {"file_path": "tests/link_dir/model.py", "content": "x"}, "deny"),
    ("Write", {"file_path": "tests/../train.py", "content": "x"}, "deny"),
    # interpreter start-up code and compiled files
    ("Write", {"file_path": ".venv/lib/python3.11/site-packages/fix.pth", "content": "import os"}, "deny"),
    ("Write", {"file_path": "src/__pycache__/model.cpython-311.pyc", "content": "x"}, "deny"),
    # the server's state: denied; its scratch folder: allowed
    ("Write", {"file_path": ".trainsleuth/state.db", "content": ""}, "deny"),
    ("Edit", {"file_path": ".trainsleuth/gate.json", "old_string": "a", "new_string": "b"}, "deny"),
    ("Write", {"file_path": ".trainsleuth/scratch/probe_entry.py", "content": "def make(): ..."}, "allow"),
    ("Write", {"file_path": "tests/test_nan_repro.py", "content": "def test_x(): pass\n"}, "allow"),
    ("Write", {"file_path": "logs/notes.log", "content": "x"}, "allow"),
    ("Read", {"file_path": "train.py"}, "allow"),
    ("Grep", {"pattern": "lr"}, "allow"),
    # other MCP servers' write tools (the reference filesystem server): every path counts
    ("mcp__filesystem__write_file", {"path": "train.py", "content": "x"}, "deny"),
    ("mcp__filesystem__move_file", {"source": "train.py", "destination": "/tmp/t.py"}, "deny"),
    ("mcp__filesystem__edit_file", {"path": "tests/ln.py", "edits": []}, "deny"),
    ("mcp__filesystem__write_file", {"path": ".trainsleuth/scratch/a.txt", "content": "x"}, "allow"),
    ("mcp__filesystem__read_text_file", {"path": "train.py"}, "allow"),
    # trainsleuth's own tools are not gated (the server enforces the protocol); approval asks the person
    ("mcp__trainsleuth__record_evidence", {"investigation_id": "x", "summary": "s"}, "allow"),
    ("mcp__trainsleuth__approve_diagnosis", {"investigation_id": "x"}, "ask"),
]


def _absolute(ws: Path, tool_input: dict[str, object]) -> dict[str, object]:
    out = dict(tool_input)
    for key in ("file_path", "notebook_path", "path", "source"):
        value = out.get(key)
        if isinstance(value, str):
            out[key] = str(ws / value)
    return out


@pytest.mark.parametrize(("tool", "tool_input", "expected"), EDIT_PAYLOADS)
def test_claude_code_edit_payloads(
    workspace: tuple[Path, str], tool: str, tool_input: dict[str, object], expected: str
) -> None:
    ws, _ = workspace
    outcome = run_hook("claude-code", claude_event(ws, tool, _absolute(ws, tool_input)))
    assert claude_verdict(outcome.stdout, outcome.exit_code) == expected, (tool, tool_input, outcome)


def test_edit_payloads_through_the_real_hook(workspace: tuple[Path, str]) -> None:
    ws, iid = workspace
    write = claude_event(ws, "Write", {"file_path": str(ws / "tests" / "ln.py"), "content": "x"})
    proc = run_hook_process("claude-code", write)
    assert claude_verdict(proc.stdout, proc.returncode) == "deny" and "train.py" in proc.stdout
    ask = claude_event(ws, "mcp__trainsleuth__approve_diagnosis", {"investigation_id": iid})
    proc = run_hook_process("claude-code", ask)
    assert claude_verdict(proc.stdout, proc.returncode) == "ask" and "person" in proc.stdout


def test_cursor_payloads(workspace: tuple[Path, str]) -> None:
    ws, _ = workspace
    cases = [
        (
            cursor_event(ws, "preToolUse", tool_name="Write", tool_input={"file_path": str(ws / "train.py")}),
            "deny",
        ),
        (
            cursor_event(ws, "preToolUse", tool_name="Delete", tool_input={"path": str(ws / "model.py")}),
            "deny",
        ),
        (
            cursor_event(ws, "preToolUse", tool_name="Shell", tool_input={"command": "git reset --hard"}),
            "deny",
        ),
        (
            cursor_event(
                ws, "preToolUse", tool_name="Write", tool_input={"file_path": str(ws / "tests/ln.py")}
            ),
            "deny",
        ),
        (
            cursor_event(
                ws,
                "preToolUse",
                tool_name="Write",
                tool_input={"file_path": str(ws / ".trainsleuth/scratch/e.py")},
            ),
            "allow",
        ),
        (
            cursor_event(
                ws,
                "beforeMCPExecution",
                tool_name="approve_diagnosis",
                tool_input="{}",
                command="trainsleuth serve",
            ),
            "ask",
        ),
        (cursor_event(ws, "beforeShellExecution", command="pytest -q tests", cwd=str(ws)), "allow"),
    ]
    for payload, expected in cases:
        body = json.loads(run_hook("cursor", payload).stdout)
        assert body["permission"] == expected, (payload, body)


def test_unreadable_or_tampered_state_closes_the_gate(tmp_path: Path) -> None:
    """The gate consumes the protocol's answer; when the state cannot be read it denies and says why."""
    ws = make_workspace(tmp_path / "proj")
    open_investigation(ws)
    db = default_state_path(ws)  # wherever the protocol keeps it
    conn = sqlite3.connect(db)
    conn.execute("DROP TABLE investigations")
    conn.execute("CREATE TABLE investigations (nonsense TEXT)")
    conn.commit()
    conn.close()
    outcome = run_hook(
        "claude-code", claude_event(ws, "Write", {"file_path": str(ws / "train.py"), "content": "x"})
    )
    assert claude_verdict(outcome.stdout, outcome.exit_code) == "deny"
    assert any(why in outcome.stdout for why in ("cannot be read", "cannot read", "seal"))
    db.write_bytes(b"not sqlite" * 200)
    proc = run_hook_process("claude-code", claude_event(ws, "Bash", {"command": "sed -i s/a/b/ train.py"}))
    assert claude_verdict(proc.stdout, proc.returncode) == "deny"
    assert "state" in proc.stdout


def windsurf_event(action: str, **tool_info: object) -> str:
    """Windsurf's Cascade hook input: the common fields and the action's tool_info."""
    return json.dumps(
        {
            "agent_action_name": action,
            "trajectory_id": "traj-1",
            "execution_id": "exec-1",
            "timestamp": "2026-11-25T10:00:00.000000+00:00",
            "model_name": "SWE-1.6",
            "tool_info": tool_info,
        }
    )


def test_windsurf_cascade_hooks(workspace: tuple[Path, str]) -> None:
    ws, iid = workspace
    denied = [
        windsurf_event("pre_run_command", command_line="git -C . checkout -- train.py", cwd=str(ws)),
        windsurf_event(
            "pre_write_code",
            file_path=str(ws / "tests" / "ln.py"),
            edits=[{"old_string": "10.0", "new_string": "1e-3"}],
        ),
        windsurf_event(
            "pre_mcp_tool_use",
            mcp_server_name="filesystem",
            mcp_tool_name="write_file",
            mcp_tool_arguments={"path": str(ws / "train.py"), "content": "x"},
        ),
    ]
    for payload in denied:
        proc = run_hook_process("windsurf", payload)
        assert proc.returncode == 2 and iid in proc.stderr, (payload, proc.stderr)
    allowed = [
        windsurf_event("pre_run_command", command_line="pytest -q tests", cwd=str(ws)),
        windsurf_event("pre_write_code", file_path=str(ws / ".trainsleuth" / "scratch" / "e.py"), edits=[]),
        windsurf_event("pre_read_code", file_path=str(ws / "train.py")),
    ]
    for payload in allowed:
        outcome = run_hook("windsurf", payload)
        assert outcome.exit_code == 0 and outcome.stderr == "", (payload, outcome)
    broken = run_hook("windsurf", "{not json")
    assert broken.exit_code == 2 and "fails closed" in broken.stderr

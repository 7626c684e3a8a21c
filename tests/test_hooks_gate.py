"""The edit gate fed each client's real hook input JSON: allow/deny, output format, fail-closed path.

Investigation state is made by the real protocol tools through an in-memory MCP client.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from trainsleuth.clients.hooks import run_hook, shell_write_targets
from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig

TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")


def _drive(ws: Path, until: str) -> str:
    """Open an investigation in `ws` and take it to `until` ('investigating' or 'fixing')."""

    async def main() -> str:
        codes: list[str] = []
        server, _ = build_server(ServerConfig(workspaces=[ws], approval_notifier=codes.append))
        async with Client(server) as c:

            async def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
                r = await c.call_tool(name, args)
                assert not r.is_error, (name, r.content)
                assert r.structured_content is not None
                return r.structured_content

            iid = (
                await call(
                    "start_investigation", {"symptom": "loss is NaN", "reproducer": "grep -q 1e-3 train.py"}
                )
            )["investigation_id"]
            if until == "investigating":
                return str(iid)
            ev = (
                await call("record_evidence", {"investigation_id": iid, "summary": "grad norm inf at step 3"})
            )["evidence_id"]
            hyps = [{"statement": f"cause {i}", "confirm_if": "c", "rule_out_if": "r"} for i in range(3)]
            hid = (await call("propose_hypotheses", {"investigation_id": iid, "hypotheses": hyps}))[
                "under_test"
            ]
            await call(
                "resolve_hypothesis",
                {"investigation_id": iid, "hypothesis_id": hid, "outcome": "confirmed", "evidence_ids": [ev]},
            )
            await call(
                "submit_diagnosis",
                {
                    "investigation_id": iid,
                    "symptom": "NaN",
                    "root_cause": "learning rate too high",
                    "evidence_ids": [ev],
                    "mechanism": "updates overflow",
                    "proposed_fix": {"files": ["train.py"], "change": "lower the learning rate"},
                    "confidence": 0.9,
                    "disproving_observation": "NaN persists with a low learning rate",
                },
            )
            code = re.findall(r"One-time code: (\d{4}-\d{4})", codes[-1])[-1]  # what the person read
            await call("approve_diagnosis", {"investigation_id": iid, "code": code})
            await call("begin_fix", {"investigation_id": iid, "description": "lower the learning rate"})
            return str(iid)

    return anyio.run(main)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "proj"
    (ws / "tests").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "train.py").write_text("lr = 10.0\n")
    return ws


def claude_event(ws: Path, tool: str, tool_input: dict[str, Any]) -> str:
    """Claude Code's PreToolUse hook input, as it writes it on stdin."""
    return json.dumps(
        {
            "session_id": "abc123",
            "transcript_path": str(ws / ".claude" / "t.jsonl"),
            "cwd": str(ws),
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_input": tool_input,
            "tool_use_id": "toolu_01ABC123",
        }
    )


def cursor_event(ws: Path, event: str, **fields: Any) -> str:
    """Cursor's hook input: the common fields plus the event's own."""
    return json.dumps(
        {
            "hook_event_name": event,
            "conversation_id": "conv-123",
            "generation_id": "gen-456",
            "workspace_roots": [str(ws)],
            "cursor_version": "1.7.2",
            **fields,
        }
    )


def _deny_reason_claude(stdout: str) -> str:
    out = json.loads(stdout)
    spec = out["hookSpecificOutput"]
    assert spec["hookEventName"] == "PreToolUse"
    assert spec["permissionDecision"] == "deny"
    return str(spec["permissionDecisionReason"])


def test_no_investigation_allows_everything(repo: Path) -> None:
    edit = claude_event(
        repo, "Edit", {"file_path": str(repo / "train.py"), "old_string": "10.0", "new_string": "1e-3"}
    )
    outcome = run_hook("claude-code", edit)
    # Allowed: no output, exit 0, so Claude Code's own permission prompt still applies.
    assert (outcome.stdout, outcome.exit_code) == ("", 0)
    cur = run_hook(
        "cursor", cursor_event(repo, "beforeShellExecution", command="sed -i s/10/1/ train.py", cwd=str(repo))
    )
    assert json.loads(cur.stdout) == {"permission": "allow"} and cur.exit_code == 0
    assert not (repo / ".trainsleuth").exists()  # the gate never creates state


def test_claude_code_open_investigation_denies_source_edits(repo: Path) -> None:
    iid = _drive(repo, "investigating")
    for tool, tool_input in [
        ("Edit", {"file_path": str(repo / "train.py"), "old_string": "10.0", "new_string": "1e-3"}),
        ("Write", {"file_path": str(repo / "model.py"), "content": "x = 1\n"}),
        (
            "MultiEdit",
            {"file_path": str(repo / "train.py"), "edits": [{"old_string": "a", "new_string": "b"}]},
        ),
        ("NotebookEdit", {"notebook_path": str(repo / "nb.ipynb"), "new_source": "x"}),
        ("Bash", {"command": "sed -i 's/10.0/1e-3/' train.py", "description": "lower lr"}),
        ("Bash", {"command": "cat > train.py <<'EOF'\nlr = 1e-3\nEOF"}),
        ("Bash", {"command": "echo 'lr = 1' | tee train.py"}),
        ("Bash", {"command": "cp /tmp/other.py train.py"}),
        ("Bash", {"command": "rm train.py"}),
        ("mcp__filesystem__write_file", {"path": str(repo / "train.py"), "content": "x"}),
    ]:
        outcome = run_hook("claude-code", claude_event(repo, tool, tool_input))
        assert outcome.exit_code == 0, (tool, tool_input)
        reason = _deny_reason_claude(outcome.stdout)
        assert iid in reason and "without an approved diagnosis" in reason
        assert "Next step:" in reason and "submit_diagnosis" in reason
    # The session may run from another folder: the edited file's own workspace state decides.
    elsewhere = claude_event(repo.parent, "Write", {"file_path": str(repo / "train.py"), "content": "x"})
    assert iid in _deny_reason_claude(run_hook("claude-code", elsewhere).stdout)
    nested = claude_event(repo, "Bash", {"command": "cd src && echo x > ../train.py"})
    assert iid in _deny_reason_claude(run_hook("claude-code", nested).stdout)


def test_claude_code_allows_reads_tests_artefacts_and_outside_files(repo: Path, tmp_path: Path) -> None:
    _drive(repo, "investigating")
    for tool, tool_input in [
        ("Read", {"file_path": str(repo / "train.py")}),
        ("Grep", {"pattern": "lr"}),
        ("Edit", {"file_path": str(repo / "tests" / "test_nan.py"), "old_string": "a", "new_string": "b"}),
        ("Write", {"file_path": str(repo / "test_repro.py"), "content": "def test_x(): pass\n"}),
        ("Write", {"file_path": str(tmp_path / "elsewhere" / "notes.md"), "content": "notes"}),
        ("Bash", {"command": "python train.py 2>&1 | tee run.log"}),
        ("Bash", {"command": "git status && git diff && pytest -q > /dev/null 2>&1"}),
        ("Bash", {"command": "grep -n 'lr' train.py | head"}),
        ("mcp__trainsleuth__verify_fix", {"investigation_id": "x"}),
        ("mcp__filesystem__read_text_file", {"path": str(repo / "train.py")}),
    ]:
        outcome = run_hook("claude-code", claude_event(repo, tool, tool_input))
        assert (outcome.stdout, outcome.exit_code) == ("", 0), (tool, tool_input, outcome)


def test_gate_opens_during_an_approved_fix_attempt(repo: Path) -> None:
    _drive(repo, "fixing")
    edit = claude_event(
        repo, "Edit", {"file_path": str(repo / "train.py"), "old_string": "10.0", "new_string": "1e-3"}
    )
    assert run_hook("claude-code", edit).stdout == ""
    cur = run_hook(
        "cursor", cursor_event(repo, "beforeShellExecution", command="sed -i s/10/1/ train.py", cwd=str(repo))
    )
    assert json.loads(cur.stdout)["permission"] == "allow"


def test_cursor_events_and_response_format(repo: Path) -> None:
    iid = _drive(repo, "investigating")
    denied = [
        cursor_event(repo, "beforeShellExecution", command="echo 'lr = 1e-3' > train.py", cwd=str(repo)),
        cursor_event(
            repo,
            "preToolUse",
            tool_name="Write",
            tool_input={"file_path": str(repo / "train.py"), "content": "x"},
        ),
        cursor_event(
            repo,
            "preToolUse",
            tool_name="StrReplace",
            tool_input={"path": "train.py", "old_string": "10", "new_string": "1"},
        ),
        cursor_event(
            repo,
            "beforeMCPExecution",
            tool_name="write_file",
            tool_input=json.dumps({"path": str(repo / "train.py"), "content": "x"}),
            command="npx -y @modelcontextprotocol/server-filesystem /proj",
        ),
    ]
    for event in denied:
        outcome = run_hook("cursor", event)
        body = json.loads(outcome.stdout)
        assert outcome.exit_code == 0
        assert body["permission"] == "deny", event
        assert iid in body["agent_message"] and "Next step:" in body["agent_message"]
        assert body["user_message"] == body["agent_message"] == body["agentMessage"] == body["userMessage"]
    allowed = [
        cursor_event(repo, "beforeShellExecution", command="python train.py --steps 5", cwd=str(repo)),
        cursor_event(repo, "preToolUse", tool_name="Read", tool_input={"file_path": str(repo / "train.py")}),
        cursor_event(
            repo, "preToolUse", tool_name="Write", tool_input={"file_path": str(repo / "tests" / "test_a.py")}
        ),
        cursor_event(
            repo,
            "beforeMCPExecution",
            tool_name="begin_fix",
            tool_input="{}",
            command=f"{TRAINSLEUTH} serve",
        ),
    ]
    for event in allowed:
        assert json.loads(run_hook("cursor", event).stdout) == {"permission": "allow"}, event


def test_fail_closed_on_bad_input_and_unreadable_state(repo: Path) -> None:
    bad = run_hook("claude-code", "this is not json")
    assert bad.exit_code == 2 and bad.stdout == ""
    assert "fails closed" in bad.stderr
    no_tool = run_hook("claude-code", json.dumps({"hook_event_name": "PreToolUse", "cwd": str(repo)}))
    assert no_tool.exit_code == 2 and "tool_name" in no_tool.stderr
    cur = run_hook("cursor", "[1, 2]")
    assert cur.exit_code == 2 and json.loads(cur.stdout)["permission"] == "deny"
    unknown = run_hook("cursor", cursor_event(repo, "someFutureEvent"))
    assert unknown.exit_code == 2 and "someFutureEvent" in json.loads(unknown.stdout)["agent_message"]
    # A state database that cannot be read denies edits (the gate cannot know the protocol state).
    (repo / ".trainsleuth").mkdir()
    (repo / ".trainsleuth" / "state.db").write_bytes(b"not a sqlite database at all" * 100)
    edit = claude_event(repo, "Write", {"file_path": str(repo / "train.py"), "content": "x"})
    reason = _deny_reason_claude(run_hook("claude-code", edit).stdout)
    assert "cannot read the trainsleuth state" in reason


def test_cli_hook_subprocess_with_real_stdin(repo: Path) -> None:
    """What the clients actually run: `trainsleuth hook CLIENT` with the event on stdin."""
    _drive(repo, "investigating")
    env = dict(os.environ)
    edit = claude_event(
        repo, "Edit", {"file_path": str(repo / "train.py"), "old_string": "1", "new_string": "2"}
    )
    proc = subprocess.run(
        [TRAINSLEUTH, "hook", "claude-code"], input=edit, capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "submit_diagnosis" in _deny_reason_claude(proc.stdout)
    crash = subprocess.run(
        [TRAINSLEUTH, "hook", "claude-code"], input="{", capture_output=True, text=True, env=env, timeout=60
    )
    assert crash.returncode == 2 and "fails closed" in crash.stderr
    shell = cursor_event(repo, "beforeShellExecution", command="mv train.py old.py", cwd=str(repo))
    cur = subprocess.run(
        [TRAINSLEUTH, "hook", "cursor"], input=shell, capture_output=True, text=True, env=env, timeout=60
    )
    assert cur.returncode == 0 and json.loads(cur.stdout)["permission"] == "deny"


@pytest.mark.parametrize(
    ("command", "targets"),
    [
        ("python train.py 2>&1 | tee run.log", ["run.log"]),
        ("echo hi>out.py", ["out.py"]),
        ("sed -i 's/a/b/' model.py && ls", ["model.py"]),
        ("sed -n 1p model.py", []),
        ("perl -pi -e 's/a/b/' m.py", ["m.py"]),
        ("ls &> /dev/null; pytest -q >/dev/null 2>&1", []),
        ('x=1 echo "a > b"', []),
        ("cp a.py b.py", ["b.py", "b.py/a.py"]),
        ("mv a.py b.py", ["b.py", "b.py/a.py", "a.py"]),
        ("sudo rm -rf build", ["build"]),
        ("git checkout -- model.py", ["model.py"]),
        ("git apply fix.patch", ["*"]),
        ("dd if=/dev/zero of=blob.bin", ["blob.bin"]),
        ("ls\ntouch new.py", ["new.py"]),
        ("git log --oneline | head", []),
        ("cd src && echo x > ../train.py", ["../train.py", "train.py"]),
        ("cd /tmp; touch a.py", ["/tmp/a.py", "a.py"]),
    ],
)
def test_shell_write_detection(command: str, targets: list[str]) -> None:
    # A folder that may or may not be entered (`cd X;`) yields both places; both are gated.
    assert sorted(set(shell_write_targets(command))) == sorted(set(targets))

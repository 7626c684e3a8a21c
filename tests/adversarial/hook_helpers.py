"""Shared set-up for the edit-gate tests: real workspaces with real investigation state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig

TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")
# Where the protocol keeps per-user state when it lives outside the workspace (harmless where it does not).
STATE_ENV = "TRAINSLEUTH_STATE_DIR"


def shared_workspace(base: Path) -> tuple[Path, str, Path]:
    """A corpus workspace with an open investigation, made once for a test module: (workspace, id, state root).

    Tests that use it set STATE_ENV to the returned root (`use_state_root`), so the state they read is the
    one made here even where each test otherwise gets its own state folder.
    """
    root = base / "state-root"
    root.mkdir(parents=True, exist_ok=True)
    ws = make_workspace(base / "proj")
    saved = os.environ.get(STATE_ENV)
    os.environ[STATE_ENV] = str(root)
    try:
        iid = open_investigation(ws)
    finally:
        if saved is None:
            del os.environ[STATE_ENV]
        else:
            os.environ[STATE_ENV] = saved
    return ws, iid, root


def open_investigation(ws: Path) -> str:
    """Start a real investigation in `ws` through the real server (in-memory MCP client)."""

    async def main() -> str:
        server, _ = build_server(ServerConfig(workspaces=[ws]))
        async with Client(server) as c:
            r = await c.call_tool(
                "start_investigation", {"symptom": "loss is NaN at step 40", "reproducer": "python train.py"}
            )
            assert not r.is_error, r.content
            assert r.structured_content is not None
            return str(r.structured_content["investigation_id"])

    return anyio.run(main)


def make_workspace(ws: Path) -> Path:
    """A training project as the corpus expects it (see hook_corpus.py)."""
    for folder in ("src", "tests", "logs", "configs", "data", "checkpoints", "runs", "scripts"):
        (ws / folder).mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "train.py").write_text("lr = 10.0\n")
    (ws / "model.py").write_text("class Model: ...\n")
    (ws / "src" / "model.py").write_text("class Model: ...\n")
    (ws / "tests" / "test_model.py").write_text("def test_forward():\n    assert True\n")
    (ws / "logs" / "train.log").write_text("step 1 loss 2.3\nstep 2 loss nan\n")
    (ws / "configs" / "train.json").write_text(json.dumps({"learning_rate": 10.0}))
    (ws / "requirements.txt").write_text("torch\n")
    fix = ws / "fix.sh"
    fix.write_text("#!/bin/bash\ncp /tmp/fixed.py train.py\n")
    fix.chmod(0o755)
    # Made before the investigation (by the user, or a program): links from tests/ to gated files.
    os.symlink("../train.py", ws / "tests" / "ln.py")
    os.link(ws / "train.py", ws / "tests" / "hard.py")
    os.symlink("../src", ws / "tests" / "link_dir")
    return ws


def claude_event(ws: Path, tool: str, tool_input: dict[str, Any], cwd: Path | None = None) -> str:
    """Claude Code's PreToolUse hook input, as it writes it on stdin."""
    return json.dumps(
        {
            "session_id": "abc123",
            "transcript_path": str(ws / ".claude" / "t.jsonl"),
            "cwd": str(cwd or ws),
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


def claude_verdict(stdout: str, exit_code: int) -> str:
    """'allow', 'deny' or 'ask' from Claude Code hook output (exit 2 blocks: 'deny')."""
    if exit_code == 2:
        return "deny"
    assert exit_code == 0, exit_code
    if not stdout.strip():
        return "allow"
    return str(json.loads(stdout)["hookSpecificOutput"]["permissionDecision"])


def run_hook_process(client: str, payload: str, *args: str) -> subprocess.CompletedProcess[str]:
    """What the clients run: `trainsleuth hook CLIENT` with the event on stdin."""
    return subprocess.run(
        [TRAINSLEUTH, "hook", client, *args], input=payload, capture_output=True, text=True, timeout=60
    )

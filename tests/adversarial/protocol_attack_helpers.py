"""Helpers for the protocol attack tests: a real `trainsleuth serve` over stdio, the person deciding in a
real pseudo-terminal with `trainsleuth approve`, and the real hook command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import stdio_client
from test_protocol_helpers import Driver, TerminalPerson, stdio_params

TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")


@asynccontextmanager
async def stdio_session(
    ws: Path, *extra: str, log: Path | None = None, **client: Any
) -> AsyncIterator[Driver]:
    """A real server subprocess on `ws`; the Driver's person reads its stderr."""
    log = log or ws.parent / f"stderr-{os.getpid()}-{id(ws)}.txt"
    with log.open("a") as err:
        async with Client(stdio_client(stdio_params(ws, *extra), errlog=err), **client) as c:
            yield Driver(c, TerminalPerson(ws))  # type: ignore[arg-type]


def hook(ws: Path, tool: str, tool_input: dict[str, Any], cwd: Path | None = None) -> dict[str, Any]:
    """Run the real `trainsleuth hook claude-code` with Claude Code's PreToolUse JSON; parse its answer."""
    event = {
        "session_id": "s",
        "transcript_path": str(ws / "t.jsonl"),
        "cwd": str(cwd or ws),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "toolu_1",
    }
    proc = subprocess.run(
        [TRAINSLEUTH, "hook", "claude-code"],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd or ws,
    )
    if proc.returncode == 2:
        return {"allowed": False, "reason": proc.stderr}
    assert proc.returncode == 0, proc.stderr
    if not proc.stdout.strip():
        return {"allowed": True, "reason": ""}
    spec = json.loads(proc.stdout)["hookSpecificOutput"]
    return {"allowed": spec["permissionDecision"] != "deny", "reason": spec["permissionDecisionReason"]}


def edit(ws: Path, name: str = "train.py") -> dict[str, Any]:
    """Ask the hook whether the assistant may edit `name` with Claude Code's Edit tool."""
    return hook(ws, "Edit", {"file_path": str(ws / name), "old_string": "a", "new_string": "b"})

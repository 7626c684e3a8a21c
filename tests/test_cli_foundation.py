"""The command line: every subcommand of the spec exists and explains itself; start-up stays light."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")
SPEC_COMMANDS = ["serve", "probe", "logs", "client", "install", "hook", "demo"]


def test_top_level_help_lists_every_command() -> None:
    out = subprocess.run([TRAINSLEUTH, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    for cmd in SPEC_COMMANDS:
        assert cmd in out.stdout


@pytest.mark.parametrize("cmd", SPEC_COMMANDS)
def test_each_command_has_help(cmd: str) -> None:
    out = subprocess.run([TRAINSLEUTH, cmd, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "usage: trainsleuth " + cmd in out.stdout
    assert len(out.stdout.splitlines()) >= 3


def test_no_command_is_a_usage_error() -> None:
    out = subprocess.run([TRAINSLEUTH], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2


HEAVY = ["torch", "numpy", "matplotlib", "git", "pandas", "tensorboard", "safetensors", "ddgs"]

PROBE = f"""
HEAVY = {HEAVY!r}
import json, sys, anyio
from pathlib import Path
from mcp import Client
from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig

async def main():
    server, _ = build_server(ServerConfig(workspaces=[Path(sys.argv[1])]))
    async with Client(server) as client:
        await client.list_tools()
        await client.list_resources()
        await client.list_prompts()
anyio.run(main)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)))
"""


def test_server_start_imports_nothing_heavy(workspace: Path) -> None:
    """Cold start must not pay for torch, numpy, matplotlib, git & co. (benchmarks/startup.py measures it)."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(workspace)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []

"""End to end with a client nobody here wrote: the MCP Inspector CLI against `trainsleuth serve` (stdio).

The Inspector (`@modelcontextprotocol/inspector`, pinned in package.json) and Node 22 (the `node`
package) are installed by `make install` (`npm ci`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")
BLOOM_LOG = REPO.parent / "shared" / "realworld" / "bloom" / "tr1-13B-base.log"


def npm_tools_installed() -> None:
    missing = [
        p for p in ("node_modules/.bin/mcp-inspector", "node_modules/.bin/node") if not (REPO / p).exists()
    ]
    assert not missing, f"{missing} missing: run `make install` (it runs `npm ci` from package-lock.json)"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    shutil.copy(BLOOM_LOG, workspace / "tr1-13B-base.log")
    return workspace


def inspector(ws: Path, home: Path, *method_args: str) -> dict[str, Any]:
    npm_tools_installed()
    env = dict(os.environ)
    # The Inspector keeps settings and secrets under HOME: give it a scratch one.
    env.update({"HOME": str(home), "npm_config_update_notifier": "false", "NO_COLOR": "1"})
    proc = subprocess.run(
        ["npx", "--no-install", "@modelcontextprotocol/inspector", "--cli",
         TRAINSLEUTH, "serve", "--workspace", str(ws), *method_args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, (
        f"inspector exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    data = json.loads(proc.stdout)
    assert isinstance(data, dict)
    return data


def test_inspector_lists_calls_and_reads(ws: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    listed = inspector(ws, home, "--method", "tools/list")
    tools = {t["name"]: t for t in listed["tools"]}
    assert {"start_investigation", "analyze_training_log", "probe_gradients", "verify_fix"} <= set(tools)
    assert "path" in tools["analyze_training_log"]["inputSchema"]["properties"]

    called = inspector(
        ws,
        home,
        "--method",
        "tools/call",
        "--tool-name",
        "analyze_training_log",
        "--tool-arg",
        "path=tr1-13B-base.log",
    )
    assert called.get("isError") in (None, False), called
    report = called["structuredContent"]
    assert report["healthy"] is False
    events = {e["code"]: e for e in report["events"]}
    # The BLOOM tr1-13B excerpt: a loss spike with fp16 loss-scale drops around iteration 29050.
    assert "loss_spike" in events and "loss_scale_collapse" in events
    assert 29000 <= events["loss_spike"]["step"] <= 29100
    assert "loss_spike" in called["content"][0]["text"]

    resource = inspector(ws, home, "--method", "resources/read", "--uri", "protocol://debugging")
    (content,) = resource["contents"]
    assert content["uri"] == "protocol://debugging"
    assert "Root cause first" in content["text"] and "verify_fix" in content["text"]

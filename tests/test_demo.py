"""`trainsleuth demo` in the test suite: the real CLI, a real server subprocess, the real tools."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "demo"
TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")

# Five protocol calls (issue 22.3: <= 6 beyond the diagnostic ones); results become evidence by themselves,
# and the approval begins the fix attempt.
STEPS_IN_ORDER = [
    "start_investigation",
    "analyze_training_log",
    "probe_gradients",
    "submit_diagnosis",
    "approve_diagnosis",
    "verify_fix",
    "capture_knowledge",
]


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_demo_runs_the_whole_protocol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _digest(EXAMPLE)
    out = tmp_path / "out"
    proc = subprocess.run(
        [TRAINSLEUTH, "demo", "--out", str(out)], capture_output=True, text=True, timeout=290, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    transcript = proc.stdout
    # Every protocol step happened, in order, through the server.
    positions = [transcript.index(f"-> {step}:") for step in STEPS_IN_ORDER]
    assert positions == sorted(positions)
    assert "first non-finite at step 40" in transcript
    assert "NaN origin: encoder.norm" in transcript
    assert "asks a person to approve the diagnosis (MCP elicitation)" in transcript
    assert "approved via elicitation" in transcript
    assert "stands in for the person" in transcript  # the demo says who approved
    assert "stored as evidence e1 on the open investigation" in transcript
    assert "The server ran the reproducer on the unfixed tree: it fails" in transcript
    assert "reproducer PASSED (exit code 0)" in transcript
    assert "resolved by a verified fix and closed" in transcript
    # The plot, the report and the transcript are written.
    assert (out / "training-log.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (out / "report.md").read_text()
    assert "encoder.norm" in report and "(passed)" in report and "clamp_min(1e-6)" in report
    assert (out / "transcript.txt").read_text().count("-> ") >= len(STEPS_IN_ORDER)
    # The fix went into the scratch copy; the bundled example is untouched.
    assert "clamp_min(1e-6)" in (out / "workspace" / "model.py").read_text()
    assert _digest(EXAMPLE) == before

    # The demo left nothing in refs/trainsleuth/ nor in the repository's tracked files.
    refs = subprocess.run(
        ["git", "for-each-ref", "refs/trainsleuth/"], cwd=out / "workspace", capture_output=True, text=True
    ).stdout
    assert refs == ""

    # The state (kept beside the scratch workspace) agrees: one investigation, closed.
    async def check() -> None:
        server, _ = build_server(ServerConfig(workspaces=[out / "workspace"]))
        async with Client(server) as c:
            listed = await c.call_tool("list_investigations", {})
            assert not listed.is_error
            assert listed.structured_content is not None
            (inv,) = listed.structured_content["investigations"]
            assert inv["phase"] == "closed"

    monkeypatch.setenv("TRAINSLEUTH_STATE_DIR", str(out / "state"))
    anyio.run(check)


def test_demo_fails_loudly_naming_the_missing_piece(tmp_path: Path) -> None:
    broken = tmp_path / "example"
    broken.mkdir()
    (broken / "train.py").write_text("print('no model here')\n")
    proc = subprocess.run(
        [TRAINSLEUTH, "demo", "--out", str(tmp_path / "out"), "--example", str(broken)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 3
    assert "trainsleuth demo FAILED" in proc.stderr and "lacks model.py" in proc.stderr

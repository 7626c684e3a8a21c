"""What a new assistant needs to call a tool right the first time (issue 22.1, and the blind agent
benchmark: 8-10 `describe` calls per case went to learning argument names one tool at a time)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from trainsleuth.tools.names import closest

TRAINSLEUTH = str(Path(sys.executable).with_name("trainsleuth"))


def cli(ws: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TRAINSLEUTH, "client", *argv, "--workspace", str(ws)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ws,
    )


def test_tools_lists_every_tools_argument_names_required_first(workspace: Path) -> None:
    out = cli(workspace, "tools")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("start_investigation:")))
    assert lines[start + 1].strip().startswith("args: symptom*,")
    record = lines.index(next(line for line in lines if line.startswith("record_evidence:")))
    assert lines[record + 1].strip() == "args: investigation_id*, summary*, data"
    tools = [line for line in lines if not line.startswith(" ") and ":" in line and not line.startswith("(")]
    args = [line for line in lines if line.startswith("    args: ")]
    assert len(tools) == len(args) >= 25


def test_describe_takes_several_tools_and_names_an_unknown_one(workspace: Path) -> None:
    out = cli(workspace, "describe", "begin_fix", "verify_fix")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("arguments (* = required):") == 2 and "verify_fix:" in out.stdout
    bad = cli(workspace, "describe", "begin_fix", "verify_fx")
    assert bad.returncode == 2 and "did you mean 'verify_fix'" in bad.stderr


def test_argument_synonyms_point_at_the_argument_meant() -> None:
    assert closest("description", ["investigation_id", "summary", "data"]) == "summary"
    assert closest("cmd", ["repo", "good", "bad", "command"]) == "command"
    assert closest("logfile", ["path", "roles", "investigation_id"]) == "path"
    # spelling still wins where there is one
    assert closest("investigaton_id", ["investigation_id", "summary"]) == "investigation_id"

"""Helpers of tests/test_observe_dist*.py: a git workspace with the example scripts, and one observed check."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from trainsleuth.tools.distributed.check import DistributedReport
from trainsleuth.tools.distributed.observed import check_command
from trainsleuth.tools.distributed.stacks import find_py_spy

PY = Path(sys.executable)
DATA = Path(__file__).resolve().parent / "data" / "observe_dist"


def project(tmp_path: Path) -> Path:
    """A git workspace holding the example scripts."""
    ws = tmp_path / "proj"
    ws.mkdir()
    for script in DATA.glob("*.py"):
        shutil.copy(script, ws / script.name)
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    subprocess.run(["git", "add", "-A"], cwd=ws, check=True)
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"], cwd=ws, check=True
    )
    return ws


def check(ws: Path, command: str, **kwargs: Any) -> DistributedReport:
    """check_distributed on `command`: 3 steps, a hang after 60 s without progress, py-spy when installed."""
    options: dict[str, Any] = {
        "steps": 3,
        "hang_s": 60.0,
        "timeout_s": 240.0,
        "py_spy": find_py_spy(),
        **kwargs,
    }
    return check_command(command, python=PY, workspace=ws, **options)

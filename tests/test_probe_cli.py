"""`trainsleuth probe` as a user runs it: a real subprocess per run, JSON out, exit codes, plot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "probe"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainsleuth", "probe", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_json_findings_fail_on_and_plot(tmp_path: Path) -> None:
    plot = tmp_path / "grads.png"
    r = _cli(
        str(EXAMPLES / "broken_detached.py") + ":broken",
        "--steps",
        "3",
        "--json",
        "--fail-on",
        "warning",
        "--plot",
        str(plot),
        "--python",
        sys.executable,
        cwd=tmp_path,
    )
    assert r.returncode == 1, r.stderr
    data = json.loads(r.stdout)
    assert [f["code"] for f in data["findings"]] == ["no_gradient"]
    assert data["findings"][0]["module"] == "encoder"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_healthy_text_report_and_bad_entrypoint(tmp_path: Path) -> None:
    ok = _cli(
        str(EXAMPLES / "healthy_lstm.py") + ":make", "--steps", "3", "--fail-on", "warning", cwd=tmp_path
    )
    assert ok.returncode == 0, ok.stderr
    assert "healthy" in ok.stdout and "lstm" in ok.stdout
    bad = _cli("nowhere.py:make", "--json", cwd=tmp_path)
    assert bad.returncode == 3
    assert json.loads(bad.stdout)["error"]["kind"] == "entrypoint_not_found"
    assert "does not exist" in bad.stderr

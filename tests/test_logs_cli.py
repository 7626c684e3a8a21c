"""`trainsleuth logs analyze|extract`: JSON output, --fail-on, --plot, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainsleuth.cli import main

DATA = Path(__file__).parent / "data" / "logs"


def _bad_log(tmp_path: Path) -> Path:
    p = tmp_path / "bad.log"
    p.write_text("".join(f"step {i} | loss {2 - i / 100:.3f}\n" for i in range(30)) + "step 30 | loss nan\n")
    return p


def test_analyze_json_prints_one_object_with_events(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["logs", "analyze", str(_bad_log(tmp_path)), "--json"]) == 0
    out = capsys.readouterr().out
    report = json.loads(out)
    assert out.count("\n") == 1
    (event,) = report["events"]
    assert event["code"] == "nonfinite_metric" and event["step"] == 30 and event["severity"] == "error"
    assert set(event) >= {"code", "severity", "message", "step", "metric", "evidence", "failure_modes"}


def test_fail_on_levels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _bad_log(tmp_path)
    assert main(["logs", "analyze", str(bad), "--fail-on", "error"]) == 1
    assert main(["logs", "analyze", str(bad), "--fail-on", "warning"]) == 1
    healthy = DATA / "pipe.log"
    assert main(["logs", "analyze", str(healthy), "--fail-on", "warning"]) == 0
    assert "healthy" in capsys.readouterr().out


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["logs"]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["logs", "analyze", "x.log", "--fail-on", "panic"])
    assert exc.value.code == 2
    assert main(["logs", "extract", str(DATA / "pipe.log"), "--max-points", "1"]) == 2


def test_unreadable_input_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["logs", "analyze", str(tmp_path / "missing.log")]) == 3
    binary = tmp_path / "w.bin"
    binary.write_bytes(b"\x00" * 1000)
    assert main(["logs", "analyze", str(binary), "--json"]) == 3
    captured = capsys.readouterr()
    assert captured.out == "" and "binary file" in captured.err and "next step:" in captured.err


def test_plot_writes_png(tmp_path: Path) -> None:
    out = tmp_path / "plot.png"
    assert main(["logs", "analyze", str(DATA / "megatron_wrapped.log"), "--plot", str(out)]) == 0
    assert out.read_bytes().startswith(b"\x89PNG")


def test_extract_text_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            ["logs", "extract", str(DATA / "fairseq.log"), "--metric", "loss", "--max-points", "5", "--json"]
        )
        == 0
    )
    res = json.loads(capsys.readouterr().out)
    (s,) = res["series"]
    assert s["name"] == "loss" and len(s["values"]) <= 5
    assert (
        main(["logs", "extract", str(DATA / "fairseq.log"), "--metric", "gnorm", "--step-min", "3000"]) == 0
    )
    text = capsys.readouterr().out
    assert text.startswith("# gnorm [grad_norm]") and all(
        float(ln.split()[0]) >= 3000 for ln in text.splitlines()[1:]
    )
    assert main(["logs", "extract", str(DATA / "fairseq.log"), "--metric", "nope"]) == 1


def test_console_script_over_subprocess() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "trainsleuth", "logs", "analyze", str(DATA / "pasted_issue.md"), "--json",
         "--fail-on", "error"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert {e["code"] for e in report["events"]} == {"nonfinite_metric", "error_message"}

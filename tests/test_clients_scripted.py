"""`trainsleuth client`: real subprocesses, a real server over stdio and over HTTP, real logs."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from trainsleuth.cli import main
from trainsleuth.clients.scripted import (
    StepResult,
    UsageError,
    check_expectations,
    parse_arg,
    substitute,
)

TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")
BLOOM = Path(__file__).resolve().parents[2] / "shared" / "realworld" / "bloom"


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Ran]:
    """Run `trainsleuth client ...` in this process (the server it starts is still a real subprocess)."""

    def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Ran:
        monkeypatch.chdir(cwd)
        monkeypatch.delenv("TRAINSLEUTH_TOKEN", raising=False)
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        capsys.readouterr()
        code = main(["client", *args])
        out = capsys.readouterr()
        return Ran(code, out.out, out.err)

    return run


@pytest.fixture
def logs_ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(BLOOM / "tr8-104B-wide.log", ws / "train.log")
    # A short healthy log: loss falls smoothly, nothing to report at warning or above.
    lines = [
        f"step {i} | loss {4.0 * 0.97**i:.4f} | lr 3.0e-4 | grad_norm {1.0 + 0.01 * (i % 3):.3f}"
        for i in range(1, 121)
    ]
    (ws / "healthy.log").write_text("\n".join(lines) + "\n")
    return ws


def test_call_json_and_fail_on(logs_ws: Path, cli: Callable[..., Ran]) -> None:
    ok = cli("call", "analyze_training_log", "--arg", "path=train.log", "--json", cwd=logs_ws)
    assert ok.returncode == 0, ok.stderr
    out = json.loads(ok.stdout)
    assert out["is_error"] is False
    codes = {e["code"] for e in out["structured"]["events"]}
    assert "loss_spike" in codes  # the real BLOOM 104B log has its well-known loss spikes
    gated = cli(
        "call", "analyze_training_log", "--arg", "path=train.log", "--fail-on", "warning", cwd=logs_ws
    )
    assert gated.returncode == 1
    assert "FAIL: [warning] loss_spike" in gated.stderr


def test_call_exit_codes_for_usage_and_errors(logs_ws: Path, cli: Callable[..., Ran]) -> None:
    usage = cli("call", "analyze_training_log", "--arg", "no-equals-sign", cwd=logs_ws)
    assert usage.returncode == 2 and "expected key=value" in usage.stderr
    refused = cli("call", "analyze_training_log", "--arg", "path=/etc/passwd", cwd=logs_ws)
    assert refused.returncode == 3 and "outside the workspace" in refused.stderr
    dead = cli("call", "analyze_training_log", "--server", f"{sys.executable} -c pass", cwd=logs_ws)
    assert dead.returncode == 3 and "cannot call analyze_training_log" in dead.stderr
    missing_ws = cli("tools", "--workspace", str(logs_ws / "nope"), cwd=logs_ws)
    assert missing_ws.returncode == 2


def test_playbook_chains_calls_and_checks_expectations(logs_ws: Path, cli: Callable[..., Ran]) -> None:
    (logs_ws / "ci.yaml").write_text(
        """
steps:
  - name: start
    tool: start_investigation
    args: {symptom: "loss spikes in the 104B run", reproducer: "true"}
    expect: {equals: {phase: investigating}, exists: [investigation_id]}
  - name: healthy
    tool: analyze_training_log
    args: {path: healthy.log, investigation_id: "${start.investigation_id}"}
    expect: {fail_on: warning, exists: [evidence_id]}
  - name: inv
    tool: get_investigation
    args: {investigation_id: "${start.investigation_id}"}
    expect:
      equals: {investigation.id: "${start.investigation_id}"}
      min_items: {investigation.evidence: 1}
  - read_resource: protocol://debugging
    expect: {contains: "Capture knowledge"}
  - name: refused
    tool: begin_fix
    args: {investigation_id: "${start.investigation_id}", description: "lower the lr"}
    expect: {is_error: true, contains: "no approved diagnosis"}
"""
    )
    ok = cli("run", "ci.yaml", cwd=logs_ws)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.count("[ok]") == 5
    # The same log check against the spiky log fails the expectation: exit 1, each event listed.
    (logs_ws / "gate.yaml").write_text(
        "steps:\n  - tool: analyze_training_log\n    args: {path: train.log}\n    expect: {fail_on: warning}\n"
    )
    failed = cli("run", "gate.yaml", "--json", cwd=logs_ws)
    assert failed.returncode == 1
    report = json.loads(failed.stdout)
    assert report["exit_code"] == 1
    assert any("loss_spike" in f for f in report["steps"][0]["failures"])
    # An unexpected tool error stops the playbook with exit 3.
    (logs_ws / "err.yaml").write_text(
        "steps:\n  - tool: get_investigation\n    args: {investigation_id: inv-nope}\n"
    )
    err = cli("run", "err.yaml", cwd=logs_ws)
    assert err.returncode == 3 and "[ERROR]" in err.stdout
    # An invalid playbook is a usage error.
    (logs_ws / "bad.yaml").write_text("steps:\n  - {tool: a, read_resource: b}\n")
    assert cli("run", "bad.yaml", cwd=logs_ws).returncode == 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server(workspace: Path, token: str) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [TRAINSLEUTH, "serve", "--transport", "http", "--port", str(port), "--workspace", str(workspace)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "TRAINSLEUTH_TOKEN": token},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_url_with_token(logs_ws: Path, cli: Callable[..., Ran]) -> None:
    with http_server(logs_ws, "s3cret") as url:
        ok = cli(
            "call",
            "analyze_training_log",
            "--url",
            url,
            "--token",
            "s3cret",
            "--arg",
            "path=healthy.log",
            "--json",
            cwd=logs_ws,
        )
        assert ok.returncode == 0, ok.stderr
        assert json.loads(ok.stdout)["structured"]["events"] is not None
        listed = cli("tools", "--url", url, cwd=logs_ws, env={"TRAINSLEUTH_TOKEN": "s3cret"})
        assert listed.returncode == 0 and "verify_fix:" in listed.stdout
        wrong = cli("tools", "--url", url, "--token", "wrong", cwd=logs_ws)
        assert wrong.returncode == 3 and "401" in wrong.stderr


def test_arguments_and_expectations_units() -> None:
    assert parse_arg("steps=3") == ("steps", 3)
    assert parse_arg("flag=true") == ("flag", True)
    assert parse_arg("path=train.log") == ("path", "train.log")
    assert parse_arg("ids=[1,2]") == ("ids", [1, 2])
    assert parse_arg("expr=a=b") == ("expr", "a=b")
    with pytest.raises(UsageError):
        parse_arg("=x")
    saved = {"start": {"investigation_id": "inv-1", "n": 2}}
    assert substitute({"a": "${start.investigation_id}", "b": "n=${start.n}"}, saved) == {
        "a": "inv-1",
        "b": "n=2",
    }
    with pytest.raises(UsageError, match="no earlier step"):
        substitute("${later.x}", saved)
    step = StepResult(
        "s", "tool", "t", False, "text",
        {"report": {"events": [{"code": "loss_spike", "severity": "warning", "step": 5, "message": "m"}]}},
    )  # fmt: skip
    assert check_expectations(step, {"fail_on": "error"}) == []
    (failure,) = check_expectations(step, {"fail_on": "warning"})
    assert "loss_spike at step 5" in failure
    assert check_expectations(step, {"max_items": {"report.events": 0}}) == [
        "report.events: expected at most 0 items, got 1"
    ]
    with pytest.raises(UsageError, match="unknown expectation"):
        check_expectations(step, {"fails_on": "x"})

"""Safe folders and honest exit codes (issue 16): a FIFO or device never blocks or floods a reader,
a symlink never leads a run folder out of the workspace, and a log that was not understood is never
reported as healthy, through the CLI or the MCP tool."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.tools.logs import analyze

LOG = "".join(f"step {i} | loss {3 - i / 50:.3f}\n" for i in range(40))


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    code = "import sys; from trainsleuth.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


@pytest.mark.timeout(60)
def test_fifos_named_like_logs_and_dev_zero_in_a_run_folder_are_skipped(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "checkpoint-10").mkdir(parents=True)
    os.mkfifo(run / "checkpoint-10" / "trainer_state.json")  # nothing ever writes to it
    os.mkfifo(run / "events.out.tfevents.1.host")
    (run / "zero.log").symlink_to("/dev/zero")
    (run / "train.log").write_text(LOG)
    r = analyze(run)
    assert r.format == "text" or r.format == "folder"
    assert r.verdict == "healthy" and {s.name for s in r.series} == {"loss"}
    notes = " ".join(r.notes)
    assert "a FIFO, not a regular file" in notes and "trainer_state.json" in notes
    assert "events.out.tfevents.1.host" in notes and "symlink to a device" in notes


@pytest.mark.timeout(60)
def test_dev_zero_and_fifo_given_directly_are_refused_without_reading(tmp_path: Path) -> None:
    link = tmp_path / "zero.log"
    link.symlink_to("/dev/zero")
    proc = _cli("logs", "analyze", str(link))
    assert proc.returncode == 3 and "a device, not a regular file" in proc.stderr
    fifo = tmp_path / "trainer_state.json"
    os.mkfifo(fifo)
    proc = _cli("logs", "analyze", str(fifo), "--fail-on", "warning")
    assert proc.returncode == 3 and "a FIFO" in proc.stderr


@pytest.mark.anyio
async def test_server_skips_symlinks_leading_out_of_the_workspace(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.log").write_text("step 1 | loss 99\n" * 5)
    run = workspace / "run"
    run.mkdir()
    (run / "train.log").write_text(LOG)
    (run / "more.log").symlink_to(outside / "secret.log")
    (run / "dev.log").symlink_to("/dev/zero")
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        res = await client.call_tool("analyze_training_log", {"path": "run"})
        assert not res.is_error, res.content[0].text
        out = res.structured_content
        assert out is not None and out["verdict"] == "healthy"
        assert [s["name"] for s in out["series"]] == ["loss"]  # secret.log was not read
        assert any("symlink leading outside the workspace" in n and "more.log" in n for n in out["notes"])
        bad = await client.call_tool("analyze_training_log", {"path": "run", "roles": {"loss": "nope"}})
        assert bad.is_error and "no metric 'nope'" in bad.content[0].text
        fixed = await client.call_tool(
            "analyze_training_log", {"path": "run/train.log", "roles": {"loss": "loss"}}
        )
        assert fixed.structured_content["parse"]["user_roles"] == {"loss": "loss"}  # type: ignore[index]
        # extract_metrics' format is a plain string in the schema (tools/list budget) but still checked
        wrong = await client.call_tool("extract_metrics", {"path": "run/train.log", "format": "bogus"})
        assert wrong.is_error and "format" in wrong.content[0].text and "megatron" in wrong.content[0].text
        ok = await client.call_tool(
            "extract_metrics", {"path": "run/train.log", "format": "keyvalue", "roles": {"loss": "loss"}}
        )
        assert not ok.is_error and [s["name"] for s in ok.structured_content["series"]] == ["loss"]  # type: ignore[index]


@pytest.mark.parametrize(
    "name,text",
    [("empty.log", ""), ("train.py", "import torch\nlr = 3e-4\nfor step in range(10):\n    loss = 0.0\n")],
)
def test_cli_not_understood_exits_4_with_fail_on_and_never_says_healthy(
    tmp_path: Path, name: str, text: str
) -> None:
    p = tmp_path / name
    p.write_text(text)
    proc = _cli("logs", "analyze", str(p), "--fail-on", "warning")
    assert proc.returncode == 4, proc.stderr
    assert "healthy" not in proc.stdout.lower().replace("not a healthy verdict", "")
    assert "NOT UNDERSTOOD" in proc.stdout and "--role loss=KEY" in proc.stderr
    assert _cli("logs", "analyze", str(p)).returncode == 0  # without --fail-on it is a report, not a gate
    report = json.loads(_cli("logs", "analyze", str(p), "--json").stdout)
    assert report["verdict"] == "not_understood" and report["healthy"] is None


def test_cli_roles_and_help_document_exit_codes(tmp_path: Path) -> None:
    p = tmp_path / "llmc.log"
    p.write_text("".join(f"s:{i} trl:{4 - i / 100:.4f}\n" for i in range(50)))
    ok = _cli("logs", "analyze", str(p), "--json", "--fail-on", "warning")
    assert ok.returncode == 0 and json.loads(ok.stdout)["parse"]["judged"] == ["trl"]
    bad = _cli("logs", "analyze", str(p), "--role", "loss=tr1")
    assert bad.returncode == 3 and "did you mean 'trl'" in bad.stderr
    usage = _cli("logs", "analyze", str(p), "--role", "loss")
    assert usage.returncode == 3 and "ROLE=KEY" in usage.stderr
    helptext = _cli("logs", "analyze", "--help").stdout
    assert "4  not understood" in helptext and "--role ROLE=KEY" in helptext


def test_client_fail_on_does_not_pass_a_log_that_was_not_understood(tmp_path: Path) -> None:
    (tmp_path / "empty.log").write_text("")
    (tmp_path / "train.log").write_text(LOG)
    bad = _cli(
        "client",
        "call",
        "analyze_training_log",
        "--arg",
        "path=empty.log",
        "--fail-on",
        "warning",
        cwd=tmp_path,
    )
    assert bad.returncode == 1 and "verdict not_understood" in bad.stdout + bad.stderr
    ok = _cli(
        "client",
        "call",
        "analyze_training_log",
        "--arg",
        "path=train.log",
        "--fail-on",
        "warning",
        cwd=tmp_path,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr

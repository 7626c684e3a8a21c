"""Bad input gets a clear result or error every time: never a crash, never silent garbage."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.tools.logs import LogInputError, analyze, extract


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "empty.log"
    p.write_bytes(b"")
    report = analyze(p)
    assert not report.has_metrics and report.events == []
    assert report.verdict == "not_understood" and report.healthy is None
    assert report.notes[0].startswith("Not understood: no metric records were read")
    assert any(n.startswith("No metrics found") for n in report.notes) and "the file is empty" in report.notes


def test_binary_file_is_refused_plainly(tmp_path: Path) -> None:
    p = tmp_path / "model.bin"
    p.write_bytes(bytes(range(256)) * 100)
    with pytest.raises(LogInputError, match="binary file"):
        analyze(p)


def test_undecodable_bytes_are_replaced_and_counted(tmp_path: Path) -> None:
    p = tmp_path / "latin1.log"
    lines = [f"step {i} | loss {2 - i / 100:.3f} | note caf\xe9".encode("latin-1") for i in range(30)]
    p.write_bytes(b"\n".join(lines) + b"\n")
    report = analyze(p)
    assert report.has_metrics and report.records == 30
    assert any("not UTF-8" in n for n in report.notes)


def test_multi_megabyte_lines_are_skipped_not_held(tmp_path: Path) -> None:
    p = tmp_path / "long.log"
    with open(p, "wb") as f:
        f.write(b"step 1 | loss 2.0\n")
        f.write(b"x" * (3 << 20) + b"\n")  # one 3 MiB line
        f.write(b'{"step": 2, "loss": ' + b"1" * (2 << 20))  # an unterminated 2 MiB line at the end
        f.write(b"\nstep 3 | loss 1.8\n")
    report = analyze(p)
    assert report.records == 2
    assert any("longer than 1 MiB" in n for n in report.notes)


def test_log_without_metrics_says_so(tmp_path: Path) -> None:
    p = tmp_path / "chatter.log"
    p.write_text("Starting training\nLoading data from /data\nDone.\n")
    report = analyze(p)
    assert not report.has_metrics and report.healthy is None and report.verdict == "not_understood"
    assert any("No metrics found" in n for n in report.notes)


def test_folder_with_thousands_of_files(tmp_path: Path) -> None:
    d = tmp_path / "many"
    d.mkdir()
    for i in range(2000):
        (d / f"part-{i:05d}.log").write_text("x\n")
    with pytest.raises(LogInputError, match="too many to treat as one run") as info:
        analyze(d)
    assert info.value.next_step and "one log file" in info.value.next_step


def test_folder_without_logs(tmp_path: Path) -> None:
    d = tmp_path / "weights"
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"\x00" * 16)
    with pytest.raises(LogInputError, match="holds no log files"):
        analyze(d)


def test_small_folder_of_logs_prefixes_names(tmp_path: Path) -> None:
    d = tmp_path / "run"
    d.mkdir()
    (d / "rank0.log").write_text("".join(f"step {i} | loss {2 - i / 50:.3f}\n" for i in range(20)))
    (d / "rank1.log").write_text("".join(f"step {i} | loss {2 - i / 40:.3f}\n" for i in range(20)))
    report = analyze(d)
    assert report.format == "folder" and set(report.roles["loss"]) == {"rank0.log:loss", "rank1.log:loss"}


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    with pytest.raises(LogInputError, match="not a regular file"):
        analyze(fifo)


def test_permission_denied_is_a_clear_error(tmp_path: Path) -> None:
    """Run the CLI as an unprivileged user (tests may run as root, for whom chmod 000 does nothing)."""
    p = tmp_path / "secret.log"
    p.write_text("step 1 | loss 2.0\n")
    p.chmod(0o000)
    tmp_path.chmod(0o755)
    code = "import sys; from trainsleuth.cli import main; sys.exit(main(['logs', 'analyze', sys.argv[1]]))"
    cmd = [sys.executable, "-c", code, str(p)]
    if os.geteuid() == 0:  # root reads anything: drop the capabilities that let it (util-linux setpriv)
        drop = "-dac_override,-dac_read_search"
        cmd = ["setpriv", f"--inh-caps={drop}", f"--bounding-set={drop}", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert "permission denied" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_extract_argument_errors(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_text("step 1 | loss 2.0\n")
    with pytest.raises(LogInputError, match="max_points"):
        extract(p, ["loss"], max_points=1)
    with pytest.raises(LogInputError, match="above step_max"):
        extract(p, ["loss"], step_min=10, step_max=5)


@pytest.mark.anyio
async def test_server_refuses_paths_outside_the_workspace_and_reports_bad_input(
    workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.log"
    outside.write_text("step 1 | loss 2.0\n")
    (workspace / "weights.bin").write_bytes(b"\x00\x01" * 5000)
    os.mkfifo(workspace / "fifo.log")
    (workspace / "empty.log").write_text("")
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        # A log outside the workspace is only read: allowed, and the result says so (server/workspace.py).
        r = await client.call_tool("analyze_training_log", {"path": str(outside)})
        assert not r.is_error and "Read-only input outside the workspace" in r.content[0].text
        r = await client.call_tool("extract_metrics", {"path": "../outside.log", "metrics": ["loss"]})
        assert not r.is_error and "Read-only input outside the workspace" in r.content[0].text
        # Where credentials and system state live stays refused.
        r = await client.call_tool("analyze_training_log", {"path": "/etc/hostname"})
        assert r.is_error and "outside the workspace" in r.content[0].text
        r = await client.call_tool("analyze_training_log", {"path": "missing.log"})
        assert r.is_error and "does not exist" in r.content[0].text
        r = await client.call_tool("analyze_training_log", {"path": "weights.bin"})
        assert r.is_error and "binary file" in r.content[0].text and "Next step:" in r.content[0].text
        r = await client.call_tool("analyze_training_log", {"path": "fifo.log"})
        assert r.is_error and "not a regular file" in r.content[0].text
        r = await client.call_tool("analyze_training_log", {"path": "empty.log", "plot": True})
        assert not r.is_error
        assert r.structured_content is not None and r.structured_content["has_metrics"] is False
        assert "No metrics found" in r.content[0].text
        assert [c for c in r.content if c.type == "image"] == []
        r = await client.call_tool("analyze_training_log", {"path": "empty.log", "cursor": "garbage"})
        assert r.is_error and "cursor" in r.content[0].text


def test_memory_stays_bounded_by_kept_points(tmp_path: Path) -> None:
    """A ~33 MB log: every series keeps at most its capacity of buckets, and extremes survive."""
    p = tmp_path / "big.log"
    line = "step {i} | loss {loss:.4f} | lr 0.0001 | grad_norm {g:.3f} | tokens_per_sec 51234.5 | note padding-padding-padding\n"
    with open(p, "w") as f:
        for i in range(300_000):
            f.write(
                line.format(i=i, loss=9.5 if i == 233_333 else 2.0 + (i % 13) / 100, g=1.0 + (i % 7) / 10)
            )
    assert p.stat().st_size > 30_000_000
    from trainsleuth.tools.logs import collect

    collector, _, _ = collect(p, capacity=1024)
    for s in collector.series.values():
        assert s.total == 300_000 and len(s.buckets) <= 1024
    loss = collector.series["loss"]
    b = loss.buckets.lists()
    assert max(b.vmax) == 9.5
    assert b.max_step[b.vmax.index(9.5)] == 233_333

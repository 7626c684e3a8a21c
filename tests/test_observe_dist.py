"""check_distributed on the user's own launch (issue 26 items 4-5): real torchrun jobs on gloo, real hangs,
two torchrun agents as two nodes. The observer never makes a collective of its own: every rank writes
digests to files and the server compares them."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.tools.distributed.check import DistributedReport
from trainsleuth.tools.distributed.command import check_command
from trainsleuth.tools.distributed.errors import AnalysisError
from trainsleuth.tools.distributed.stacks import find_py_spy

PY = Path(sys.executable)
DATA = Path(__file__).resolve().parent / "data" / "observe" / "dist"
CASE = Path(__file__).resolve().parents[1] / "benchmarks" / "agent" / "cases" / "ddp_frozen_features"
pytestmark = pytest.mark.slow


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _repo(path: Path, files: list[Path]) -> Path:
    path.mkdir()
    for f in files:
        shutil.copy(f, path / f.name)
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=path, check=True)
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"], cwd=path, check=True
    )
    return path


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _repo(tmp_path_factory.mktemp("dist") / "proj", sorted(DATA.glob("*.py")))


def _check(ws: Path, command: str, **kw: float) -> DistributedReport:
    return check_command(command, python=PY, workspace=ws, py_spy=find_py_spy(), timeout_s=240, **kw)  # type: ignore[arg-type]


def _errors(report: DistributedReport) -> list:
    return [f for f in report.findings if f.severity != "info"]


def test_state_outside_ddp_seeded_per_rank_is_found_with_module_and_ranks(ws: Path) -> None:
    report = _check(ws, f"torchrun --nproc_per_node 2 --master_port {_port()} outside_ddp.py --seed-per-rank")
    assert not report.healthy and report.completed, report.render_text()
    first = report.findings[0]
    assert first.code == "rank_divergence" and first.severity == "error"
    assert first.module == "project" and first.evidence["origin"] == "initialisation"
    assert first.evidence["differing_ranks"] == [1] and first.evidence["kind"] == "buffer"
    assert first.evidence["tensor"] == "project.w" and first.evidence["max_abs_diff"] > 0.1
    assert "project is outside DDP (DDP wraps model)" in first.message
    # the plain tensor attribute of the same module is compared too
    assert any(f.evidence.get("tensor") == "project.offset" for f in _errors(report))
    assert report.first_divergence and report.first_divergence.startswith("buffer project.w on rank(s) [1]")
    assert sorted((p["node"], p["rank"]) for p in report.processes) == [(0, 0), (0, 1)]
    assert report.backend == "gloo" and report.wrapper == "DDP(model)"


def test_healthy_twin_with_ema_metric_and_broadcast_buffers_is_quiet(ws: Path) -> None:
    report = _check(ws, f"torchrun --nproc_per_node 2 --master_port {_port()} outside_ddp.py")
    assert report.healthy and report.completed, report.render_text()
    assert _errors(report) == []
    assert {"ema", "metric", "project"} <= set(report.outside_state)
    text = " ".join(report.notes)
    assert "broadcast from rank 0 at every forward" in text and "metric.total" in text
    # the EMA copies the model's per-rank BatchNorm statistics: said, as info, not a false alarm
    assert all(f.evidence.get("kind") == "running statistic" for f in report.findings)


def test_a_module_trained_outside_ddp_drifts_from_its_gradient(ws: Path) -> None:
    report = _check(ws, f"torchrun --nproc_per_node 2 --master_port {_port()} outside_ddp.py --train-outside")
    [finding] = _errors(report)
    assert finding.module == "norm" and finding.step == 1
    assert finding.evidence["kind"] == "gradient" and finding.evidence["origin"] == "training"
    assert "during training" in finding.message and "not all-reduced" in finding.message


def test_collectives_in_forward_never_hang_and_stay_quiet(ws: Path) -> None:
    """A BatchNorm that all-reduces in forward: the old check paired its own all_gather_object with it and hung."""
    for _ in range(3):
        report = _check(
            ws, f"torchrun --nproc_per_node 2 --master_port {_port()} collective_forward.py --steps 20"
        )
        assert report.healthy and report.completed, report.render_text()
        assert report.findings == [] and report.steps_taken == 2
        assert all(p["ended"] == "script_ended" and p["last_step"] == 20 for p in report.processes)


@pytest.mark.parametrize(
    ("mode", "waits"),
    [
        (
            "uneven",
            {0: None, 1: "barrier"},
        ),  # rank 0 in its extra backward (DDP's all-reduce), rank 1 in barrier
        (
            "barrier",
            {0: "barrier", 1: None},
        ),  # rank 0 in the barrier only it calls, rank 1 in the next backward
    ],
)
def test_a_real_hang_is_found_with_every_ranks_stack(
    ws: Path, mode: str, waits: dict[int, str | None]
) -> None:
    report = _check(ws, f"torchrun --nproc_per_node 2 --master_port {_port()} hang.py {mode}", hang_s=6)
    assert not report.healthy and not report.completed
    codes = [f.code for f in report.findings]
    assert codes[0] == "job_hung", report.render_text()
    assert "collective_mismatch" in codes
    by_rank = {s.rank: s for s in report.ranks}
    assert sorted(by_rank) == [0, 1] and all(s.status == "hung" and s.stack for s in by_rank.values())
    for rank, collective in waits.items():
        if collective:
            assert by_rank[rank].collective == collective
            assert (by_rank[rank].where or "").startswith("main (hang.py:")
        else:
            assert by_rank[rank].where and "hang.py" in by_rank[rank].where  # in backward, at the user's line
    mismatch = next(f for f in report.findings if f.code == "collective_mismatch")
    if report.flight_recorder is not None:  # the ranks answered the dump request (they always do on gloo)
        assert mismatch.evidence.get("source") != "stacks" or "barrier" in mismatch.message
        assert all(s.flight_recorder for s in report.ranks)
    assert "_ts_observe" not in mismatch.message  # the observer's wrappers are never the call site


def test_two_torchrun_agents_as_two_nodes(ws: Path) -> None:
    port = _port()
    agent = (
        "torchrun --nnodes 2 --nproc_per_node 1 --node_rank {} --rdzv-backend c10d "
        f"--rdzv-endpoint localhost:{port} --rdzv-id ts outside_ddp.py --seed-per-rank"
    )
    report = _check(ws, f"{agent.format(0)} & {agent.format(1)}; wait")
    assert report.world_size == 2, report.render_text()
    assert sorted((p["node"], p["rank"], p["local_rank"]) for p in report.processes) == [(0, 0, 0), (1, 1, 0)]
    first = report.findings[0]
    assert first.module == "project" and first.evidence["differing_ranks"] == [1]
    first = report.findings[0]
    assert first.module == "project" and first.evidence["differing_ranks"] == [1]


def test_single_process_and_bad_commands_are_explained(ws: Path) -> None:
    with pytest.raises(AnalysisError, match="single process"):
        _check(ws, "python outside_ddp.py")  # no launcher: init_process_group fails or WORLD_SIZE is 1
    with pytest.raises(AnalysisError, match="command is empty"):
        _check(ws, "  ")
    # ranks that exit before their first step (here: an argument the script refuses) are never called healthy
    with pytest.raises(AnalysisError, match="no rank finished a training step"):
        _check(ws, f"torchrun --nproc_per_node 2 --master_port {_port()} outside_ddp.py --no-such-flag")


@pytest.mark.anyio
async def test_over_mcp_the_agent_case_from_its_own_command(tmp_path: Path) -> None:
    files = [
        *sorted((CASE / "history" / "01-initial").glob("*.py")),
        CASE / "history" / "02-ddp" / "train.py",
    ]
    ws = _repo(tmp_path / "case", files)
    server, _ = build_server(ServerConfig(workspaces=[ws]))
    async with Client(server) as client:
        r = await client.call_tool(
            "check_distributed",
            {"command": f"torchrun --nproc_per_node 2 --master_port {_port()} train.py --steps 20"},
        )
        assert not r.is_error, r.content[0].text
        data = r.structured_content
        assert data["healthy"] is False and data["command"].startswith("torchrun")
        first = data["findings"][0]
        assert first["module"] == "model.features" and first["evidence"]["differing_ranks"] == [1]
        assert "model.features is outside DDP (DDP wraps head)" in first["message"]
        r = await client.call_tool(
            "check_distributed", {"command": "torchrun x.py", "entrypoint": "train.py:main"}
        )
        assert r.is_error and "exactly one" in r.content[0].text
        r = await client.call_tool("check_distributed", {})
        assert r.is_error and "exactly one" in r.content[0].text

"""check_distributed over a real MCP client: real torchrun jobs (2 ranks, gloo on CPU, tiny models)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "distributed"


def _copy(workspace: Path, name: str) -> str:
    shutil.copy(EXAMPLES / name, workspace / name)
    return f"{name}:entry"


async def _check(workspace: Path, entrypoint: str, **extra: Any) -> Any:
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        return await client.call_tool("check_distributed", {"entrypoint": entrypoint, **extra})


def _findings(result: Any) -> list[dict[str, Any]]:
    assert not result.is_error, result.content[0].text
    return list(result.structured_content["findings"])


@pytest.mark.anyio
async def test_healthy_ddp_passes_and_matches_single_process(workspace: Path) -> None:
    result = await _check(workspace, _copy(workspace, "healthy_ddp.py"))
    data = result.structured_content
    assert _findings(result) == []
    assert data["healthy"] is True
    assert data["world_size"] == 2 and data["backend"] == "gloo"
    assert data["steps_taken"] == 2
    assert data["differences"] == []
    assert data["single_process"]["grads_compared"] == 4
    assert data["single_process"]["loss_rel_diff"] <= 1e-6
    # two ranks saw different halves of the batch, so their losses differ while their weights agree
    assert data["losses_by_step"][0][0] != data["losses_by_step"][0][1]
    assert "HEALTHY" in result.content[0].text


@pytest.mark.anyio
async def test_frozen_weights_differing_per_rank_are_named(workspace: Path) -> None:
    result = await _check(workspace, _copy(workspace, "frozen_rank_skew.py"))
    findings = _findings(result)
    frozen = [
        f for f in findings if f["code"] == "rank_divergence" and f["evidence"]["kind"] == "frozen parameter"
    ]
    assert len(frozen) == 1
    first = frozen[0]
    assert first["evidence"]["tensor"] == "backbone.weight"
    assert first["module"] == "backbone"
    assert first["step"] == 1 and first["evidence"]["rank"] == 1
    assert first["evidence"]["max_abs_diff"] > 0.1
    assert result.structured_content["frozen_parameters"] == ["backbone.bias", "backbone.weight"]
    assert result.structured_content["healthy"] is False


@pytest.mark.anyio
async def test_batchnorm_buffers_drifting_apart_are_found(workspace: Path) -> None:
    result = await _check(workspace, _copy(workspace, "bn_drift.py"))
    findings = _findings(result)
    buffers = [f for f in findings if f["code"] == "rank_divergence" and f["evidence"]["kind"] == "buffer"]
    assert len(buffers) == 1
    assert buffers[0]["evidence"]["tensor"] == "1.running_mean"
    assert buffers[0]["step"] == 2  # synchronised at construction, apart after one local update
    assert "1.running_var" in buffers[0]["evidence"]["also_differ"]
    # trainable weights still agree: DDP all-reduces their gradients
    assert not [f for f in findings if f["evidence"].get("kind") in ("parameter", "gradient")]


@pytest.mark.anyio
async def test_unused_parameter_is_found_with_the_ddp_error(workspace: Path) -> None:
    result = await _check(workspace, _copy(workspace, "unused_param.py"))
    findings = _findings(result)
    assert findings[0]["code"] == "no_gradient"
    assert findings[0]["module"] == "aux_head"
    assert findings[0]["evidence"]["parameters"] == ["aux_head.weight", "aux_head.bias"]
    assert findings[0]["evidence"]["same_on_every_rank"] is True
    assert "find_unused_parameters" in findings[0]["evidence"]["ddp_error"]
    # the bucket holding the unused parameter was never reduced: gradients differ across ranks
    kinds = {f["evidence"].get("kind") for f in findings if f["code"] == "rank_divergence"}
    assert "gradient" in kinds
    assert result.structured_content["unused_parameters"] == {
        "0": ["aux_head.weight", "aux_head.bias"],
        "1": ["aux_head.weight", "aux_head.bias"],
    }


@pytest.mark.anyio
async def test_bad_inputs_are_refused_before_anything_runs(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.py"
    outside.write_text("def entry():\n    return {}\n")
    elsewhere = tmp_path / "venv-elsewhere"
    elsewhere.mkdir()
    (elsewhere / "python").symlink_to(sys.executable)
    (workspace / "x.py").write_text("def entry():\n    return {}\n")
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        r = await client.call_tool("check_distributed", {"entrypoint": f"{outside}:entry"})
        assert r.is_error and "outside the workspace" in r.content[0].text
        r = await client.call_tool("check_distributed", {"entrypoint": "no_colon_here"})
        assert r.is_error and "path/to/file.py:function" in r.content[0].text
        r = await client.call_tool("check_distributed", {"entrypoint": "missing.py:entry"})
        assert r.is_error and "does not exist" in r.content[0].text
        r = await client.call_tool(
            "check_distributed", {"entrypoint": "x.py:entry", "python": str(elsewhere / "python")}
        )
        assert r.is_error
        assert "--allow-python" in r.content[0].text
        r = await client.call_tool("check_distributed", {"entrypoint": "x.py:entry", "nproc": 1})
        assert r.is_error


def test_cancelling_kills_every_rank(workspace: Path) -> None:
    import threading
    import time

    import psutil

    from trainsleuth.tools.distributed.check import check_distributed
    from trainsleuth.tools.distributed.errors import AnalysisError

    (workspace / "slow.py").write_text("import time\n\ndef entry():\n    time.sleep(300)\n")
    cancel = threading.Event()
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            check_distributed(
                "slow.py:entry",
                python=Path(sys.executable),
                cwd=workspace,
                cancel_event=cancel,
                timeout_s=900,  # cancellation, not the timeout, must end it even on a crowded machine
            )
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    me = psutil.Process()
    workers: list[psutil.Process] = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(workers) < 2:
        time.sleep(0.3)
        workers = [
            p
            for p in me.children(recursive=True)
            if "--worker" in _cmdline(p) and "torch.distributed.run" not in _cmdline(p)
        ]
    assert len(workers) == 2, "the two ranks never started"
    cancel.set()
    thread.join(timeout=60)
    assert not thread.is_alive()
    error = outcome["error"]
    assert isinstance(error, AnalysisError) and "cancelled" in error.message
    _gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive


def _cmdline(proc: Any) -> list[str]:
    import psutil

    try:
        return list(proc.cmdline())
    except psutil.Error:
        return []

"""check_distributed command=...: the user's own torchrun command, every rank observed, compared through files.

Real torchrun jobs (gloo on CPU, tiny models) in real git workspaces: a module outside DDP seeded per
rank is named with its ranks, its healthy twin stays quiet (with state that differs per rank by design
beside it), a parameter trained outside DDP is told apart as a drift during training, and a model that
calls collectives in its forward runs to the end, healthy, every time.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from observe_dist_helpers import check, project

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.tools.distributed.digests import by_design, compare_rows


def test_a_module_outside_ddp_seeded_per_rank_is_named_with_its_ranks(tmp_path: Path) -> None:
    ws = project(tmp_path)
    report = check(ws, "torchrun --standalone --nproc_per_node 2 two_ranks.py broken")
    assert not report.healthy and report.completed and report.world_size == 2, report.render_text()
    first = report.findings[0]
    assert first.code == "rank_divergence" and first.severity == "error"
    assert first.module == "model.features" and first.step == 1
    ev = first.evidence
    assert ev["tensor"] == "model.features.w" and ev["kind"] == "buffer"
    assert ev["origin"] == "initialisation" and ev["differing_ranks"] == [1] and ev["reference_rank"] == 0
    assert ev["also_differ"] == ["model.features.scale"]  # a plain tensor attribute of the same module
    assert ev["max_abs_diff"] > 0.1 and ev["inside_ddp"] is None
    assert "model.features is outside DDP (DDP wraps only head)" in first.message
    # the unused adapter the model holds differs too, and is named as the part of `model` it is
    assert [f.module for f in report.findings] == ["model.features", "model.adapter"]
    assert report.wrappers and report.wrappers[0].startswith("DDP(head)")
    # the first steps compared, then the run watched to its end (a hang may come at an epoch's end)
    assert [(p.node, p.rank, p.reason) for p in report.processes] == [
        (0, 0, "script_ended"),
        (0, 1, "script_ended"),
    ]
    assert all(p.steps == [1, 2, 3] for p in report.processes)
    text = report.render_text()
    assert "buffer model.features.w (and 1 more in model.features) differs on rank 1" in text


def test_the_healthy_twin_is_quiet_about_what_differs_by_design(tmp_path: Path) -> None:
    ws = project(tmp_path)
    report = check(ws, "torchrun --standalone --nproc_per_node 2 two_ranks.py healthy")
    assert report.healthy and report.findings == [], report.render_text()
    assert report.completed and report.steps_taken == 3
    why = dict(line.split(": ", 1) for line in report.per_rank_by_design)
    assert "generator state" in why["model.rng_state"]
    assert "data order" in why["model.sampler_order"]
    assert "replaces at every step" in why["model.features.last_out"]
    assert "broadcast_buffers=True" in why["model.head.0.running_mean"]
    assert "model.features" in report.outside_state


def test_a_parameter_trained_outside_ddp_drifts_during_training(tmp_path: Path) -> None:
    ws = project(tmp_path)
    report = check(ws, "torchrun --standalone --nproc_per_node 2 two_ranks.py drift")
    [finding] = report.findings
    assert finding.module == "model.adapter" and finding.evidence["origin"] == "training"
    assert finding.evidence["phase"] == "after_step" and finding.step == 1
    assert "drifts during training" in finding.message and "trained outside DDP" in finding.message


def test_collectives_in_forward_never_meet_the_observer(tmp_path: Path) -> None:
    """A BatchNorm that all-reduces in forward, inside DDP: the old check's own all_gather_object paired with it
    and hung in 2 of 4 runs. The observer calls no collective: healthy, to the end, every run."""
    ws = project(tmp_path)
    for _ in range(2):
        report = check(
            ws, "torchrun --standalone --nproc_per_node 2 bn_allreduce.py 12", steps=12, hang_s=30.0
        )
        assert report.completed and report.healthy and report.findings == [], report.render_text()
        assert [len(p.steps) for p in report.processes] == [12, 12]
        assert report.ranks == [] and report.flight_recorder is None


def test_one_process_is_not_a_distributed_run(tmp_path: Path) -> None:
    ws = project(tmp_path)
    (ws / "single.py").write_text(
        "import torch\nm = torch.nn.Linear(2, 1); o = torch.optim.SGD(m.parameters(), 0.1)\n"
        "for _ in range(5):\n    o.zero_grad(); m(torch.ones(3, 2)).sum().backward(); o.step()\n"
    )
    from trainsleuth.tools.distributed.errors import AnalysisError

    with pytest.raises(AnalysisError, match="one process"):
        check(ws, "python single.py")


def test_digest_comparison() -> None:
    row = {"n": "m.w", "k": "buffer", "s": [3], "d": "float32", "v": [1.0, 3.0, 1.8, 1.2, 1.2, -0.6, 0.4]}
    assert compare_rows(row, dict(row), 0.0) is None
    nudged = {**row, "v": [1.0, 3.0, 1.8, 1.2, 1.2, -0.6, 0.4000001]}
    assert compare_rows(row, nudged, 1e-6) is None  # within rank_rtol of the tensor's scale
    far = {**row, "v": [1.5, 3.5, 2.0, 1.2, 1.2, -0.1, 0.4]}
    diff = compare_rows(row, far, 1e-6)
    assert diff is not None and diff["max_abs_diff"] == pytest.approx(0.5)
    nan = {**row, "v": [float("nan")] * 7}
    assert compare_rows(nan, dict(nan), 0.0) is None and compare_rows(row, nan, 0.0) is not None
    assert "structure" in (compare_rows(row, {**row, "s": [4]}, 0.0) or {})
    assert by_design("gen.rng", {"d": "uint8", "s": [5056]})
    assert by_design("loader.perm", {"d": "int64", "s": [64]})
    assert by_design("m.w", {"d": "float32", "s": [8], "f": {"sharded": True}})
    assert (
        by_design("m.order_weight", {"d": "float32", "s": [8]}) is None
    )  # a float is state, not a data order


@pytest.mark.anyio
async def test_over_mcp_exactly_one_of_command_or_entrypoint(workspace: Path) -> None:
    (workspace / "x.py").write_text("def f():\n    return {}\n")
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        for args in ({}, {"command": "torchrun train.py", "entrypoint": "x.py:f"}):
            result = await client.call_tool("check_distributed", args)
            assert result.is_error and "exactly one of command" in result.content[0].text
            result = await client.call_tool("compare_precision", args)
            assert result.is_error and "exactly one of command" in result.content[0].text

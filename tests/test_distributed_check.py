"""check_distributed on real 2-rank gloo jobs (CPU, tiny models).

Every wrapping pattern has a broken and a healthy entrypoint in examples/distributed/. To keep the
suite lean they share launches: one launch checks every pattern that leaves the job alive, in turn;
a hang and a crash get a launch each; one call goes through a real MCP client.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.tools.distributed.check import DistributedReport, check_many
from trainsleuth.tools.distributed.stacks import find_py_spy

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "distributed"

PATTERNS = [
    "healthy_ddp.py:entry",
    "frozen_encoder.py:entry",
    "frozen_encoder.py:healthy",
    "frozen_encoder.py:whole_model",
    "frozen_encoder.py:whole_model_healthy",
    "frozen_encoder.py:closure",
    "frozen_encoder.py:closure_healthy",
    "precomputed_features.py:entry",
    "precomputed_features.py:healthy",
    "ddp_checkpoint_after_wrap.py:entry",
    "ddp_checkpoint_after_wrap.py:healthy",
    "frozen_rank_skew.py:entry",
    "frozen_rank_skew.py:healthy",
    "ddp_freeze_after_wrap.py:entry",
    "ddp_freeze_after_wrap.py:healthy",
    "ddp_graph.py:entry",
    "ddp_graph.py:healthy",
    "ddp_graph.py:static_changes",
    "ddp_graph.py:static_healthy",
    "ddp_no_sync.py:entry",
    "ddp_no_sync.py:healthy",
    "bn_buffers.py:entry",
    "bn_buffers.py:healthy",
    "bn_buffers.py:sync_bn",
    "fsdp2_load.py:entry",
    "fsdp2_load.py:healthy",
    "uneven_batches.py:healthy",
    "collective_sizes.py:healthy",
    # the agent benchmark's distributed case (written for the benchmark, not for this tool), as an
    # assistant would write its entrypoint: the repository's own model, seeded as its train.py seeds it
    ".trainsleuth/scratch/agent_case.py:entry",
    ".trainsleuth/scratch/agent_case.py:fixed",
]

AGENT_CASE_ENTRY = """
import os

import torch
from torch import nn

from data import global_batch
from model import SignalClassifier


def _wrap_head(model):
    from torch.nn.parallel import DistributedDataParallel as DDP

    model.head = DDP(model.head)  # train.py: head = DDP(model.head)
    return model


def _build(seed):
    torch.manual_seed(seed)
    x, y = global_batch(1)
    return {
        "model": SignalClassifier(),
        "batch": (x, y),
        "loss_fn": lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1]),
        "wrap_model": _wrap_head,
    }


def entry():
    return _build(0 + int(os.environ.get("RANK", "0")))  # train.py: torch.manual_seed(args.seed + rank)


def fixed():
    return _build(0)
"""


def _workspace_with_examples(workspace: Path) -> Path:
    for path in EXAMPLES.glob("*.py"):
        shutil.copy(path, workspace / path.name)
    return workspace


def _errors(report: DistributedReport, code: str | None = None) -> list[Any]:
    return [f for f in report.findings if f.severity != "info" and (code is None or f.code == code)]


@pytest.fixture(scope="module")
def patterns(tmp_path_factory: pytest.TempPathFactory) -> dict[str, DistributedReport]:
    from benchmarks.agent.build import build_case

    ws = build_case("ddp_frozen_features", tmp_path_factory.mktemp("ws"))
    scratch = ws / ".trainsleuth" / "scratch"
    scratch.mkdir(parents=True)
    (scratch / "agent_case.py").write_text(AGENT_CASE_ENTRY)
    ws = _workspace_with_examples(ws)
    reports = check_many(PATTERNS, python=Path(sys.executable), cwd=ws, timeout_s=400, hang_s=120)
    return {r.entrypoint: r for r in reports}


def test_every_healthy_twin_is_clean(patterns: dict[str, DistributedReport]) -> None:
    healthy = [p for p in PATTERNS if p.endswith(("healthy", "healthy_ddp.py:entry", "agent_case.py:fixed"))]
    assert len(healthy) == 16
    for spec in healthy:
        report = patterns[spec]
        assert report.completed and report.steps_taken == 2, spec
        assert report.healthy, (spec, report.render_text())
        assert not report.differences, spec
    # every pattern ran in the one launch, each with its own wrapping
    assert all(patterns[p].completed for p in PATTERNS)
    plain = patterns["healthy_ddp.py:entry"]
    assert plain.single_process is not None and plain.single_process["grads_compared"] == 4
    assert plain.single_process["loss_rel_diff"] <= 1e-6
    assert plain.losses_by_step[0][0] != plain.losses_by_step[0][1]  # different shards, same weights
    assert patterns["frozen_encoder.py:healthy"].wrappers == [
        "DDP(head): find_unused_parameters=False, static_graph=False, broadcast_buffers=True"
    ]


def test_frozen_encoder_outside_ddp_is_named_with_ranks_and_first_step(
    patterns: dict[str, DistributedReport],
) -> None:
    # issue 19's headline: wrap_model wraps only the head; the rank-seeded frozen encoder sits outside
    report = patterns["frozen_encoder.py:entry"]
    assert not report.healthy and report.completed
    [frozen] = [f for f in report.findings if f.evidence.get("kind") == "frozen parameter"]
    assert frozen.module == "encoder.0" and frozen.step == 0
    assert "encoder is outside DDP (only head is wrapped)" in frozen.message
    assert frozen.evidence["phase"] == "before_wrap" and frozen.evidence["differing_ranks"] == [1]
    assert frozen.evidence["n_differ"] == 2
    assert report.first_divergence == "frozen parameter encoder.0.weight on rank(s) [1], before wrapping"
    # the loss of rank 1 is not what rank 0's model computes on rank 1's shard
    [loss] = [f for f in report.findings if f.metric == "loss"]
    assert loss.evidence["loss_differs_on_ranks"] == [1]
    # same bug with the encoder in the loss function's closure: state outside the model
    closure = patterns["frozen_encoder.py:closure"]
    assert closure.outside_state == ["encoder"]
    [outside] = [f for f in closure.findings if f.evidence.get("kind") == "outside"]
    assert outside.evidence["tensor"] == "encoder.0.weight" and outside.evidence["differing_ranks"] == [1]
    assert "outside the wrapped model" in outside.message
    assert patterns["frozen_encoder.py:closure_healthy"].outside_state == ["encoder"]


def test_the_agent_benchmark_distributed_case_is_found(patterns: dict[str, DistributedReport]) -> None:
    report = patterns[".trainsleuth/scratch/agent_case.py:entry"]
    assert report.first_divergence == "buffer features.w on rank(s) [1], before wrapping"
    [buffers] = [f for f in report.findings if f.evidence.get("kind") == "buffer"]
    assert buffers.module == "features" and buffers.step == 0 and buffers.evidence["differing_ranks"] == [1]
    assert "features is outside DDP (only head is wrapped)" in buffers.message
    assert any(f.metric == "loss" for f in report.findings)


def test_a_difference_hidden_by_ddp_construction_broadcast_is_still_reported(
    patterns: dict[str, DistributedReport],
) -> None:
    # issue 22.5: default wrapping (the whole model in DDP) broadcasts rank 0's encoder and hides it
    report = patterns["frozen_encoder.py:whole_model"]
    assert not report.healthy
    [hidden] = _errors(report)
    assert hidden.code == "rank_divergence" and hidden.evidence["kind"] == "before wrapping"
    assert hidden.evidence["tensors"] == ["encoder.0.bias", "encoder.0.weight"]
    assert hidden.evidence["after_wrapping"] == "equal to rank 0's values"
    assert "broadcast rank 0's copy at construction" in hidden.message
    assert not report.differences  # after wrapping, every rank trains the same encoder
    # FSDP2 does not broadcast: the sharded model is a mix of the ranks' weights
    fsdp = patterns["fsdp2_load.py:entry"]
    [mixed] = _errors(fsdp)
    assert mixed.evidence["after_wrapping"] == "a mix of ranks' values"
    assert mixed.evidence["n_differ"] == 4 and "fully_shard does not broadcast" in mixed.message
    assert "FSDP2(<model>)" in fsdp.wrappers
    # precomputed features: the global batch itself differs per rank
    features = patterns["precomputed_features.py:entry"]
    [inputs] = [f for f in features.findings if f.evidence.get("kind") == "input"]
    assert inputs.evidence["tensor"] == "batches[0][0]" and inputs.severity == "warning"


def test_ddp_patterns_name_what_diverges_and_why(patterns: dict[str, DistributedReport]) -> None:
    ckpt = patterns["ddp_checkpoint_after_wrap.py:entry"]
    [param] = [f for f in ckpt.findings if f.evidence.get("kind") == "parameter"]
    assert param.step == 1 and param.evidence["phase"] == "forward_entry" and param.evidence["n_differ"] == 4
    skew = patterns["frozen_rank_skew.py:entry"]
    [frozen] = [f for f in skew.findings if f.evidence.get("kind") == "frozen parameter"]
    assert frozen.module == "backbone" and frozen.step == 1 and frozen.evidence["rank"] == 1
    # frozen after DDP was built: the reducer still waits for their gradients
    freeze = patterns["ddp_freeze_after_wrap.py:entry"]
    first = freeze.findings[0]
    assert first.code == "no_gradient" and first.evidence["frozen_after_wrapping"] is True
    assert first.evidence["parameters"] == ["encoder.bias", "encoder.weight"]
    assert "Expected to have finished reduction" in first.evidence["ddp_error"]
    assert not _errors(freeze, "rank_failed")  # the DDP error is explained, not repeated
    # find_unused_parameters off: error with DDP's own words; on: only information
    unused = patterns["ddp_graph.py:entry"].findings[0]
    assert unused.code == "no_gradient" and unused.module == "aux_head" and unused.severity == "error"
    # TORCH_DISTRIBUTED_DEBUG=INFO makes DDP name them in its error
    assert unused.evidence["ddp_named"] == {
        "0": ["aux_head.bias", "aux_head.weight"],
        "1": ["aux_head.bias", "aux_head.weight"],
    }
    kinds = {f.evidence.get("kind") for f in patterns["ddp_graph.py:entry"].findings}
    assert "gradient" in kinds  # the bucket with aux_head was never reduced
    [info] = patterns["ddp_graph.py:healthy"].findings
    assert info.code == "no_gradient" and info.severity == "info" and info.evidence["find_unused_parameters"]
    static = patterns["ddp_graph.py:static_changes"].findings[0]
    assert static.code == "no_gradient" and "static_graph=True" in static.message
    assert patterns["ddp_graph.py:static_changes"].steps_taken == 1
    # no_sync() around every micro-batch: the all-reduce never happened
    no_sync = patterns["ddp_no_sync.py:entry"]
    assert no_sync.findings[0].evidence["kind"] == "no_sync" and no_sync.findings[0].step == 1
    grads = [f for f in no_sync.findings if f.evidence.get("kind") == "gradient"]
    assert grads[0].step == 1 and grads[0].evidence["differing_ranks"] == [1]


def test_buffers_and_syncbatchnorm(patterns: dict[str, DistributedReport]) -> None:
    drift = patterns["bn_buffers.py:entry"]
    [buffers] = [f for f in drift.findings if f.evidence.get("kind") == "buffer"]
    assert buffers.evidence["tensor"] == "1.running_mean" and buffers.step == 2
    assert "1.running_var" in buffers.evidence["also_differ"]
    assert not [f for f in drift.findings if f.evidence.get("kind") in ("parameter", "gradient")]
    # SyncBatchNorm: torch refuses CPU modules; the check says so instead of failing obscurely
    sync = patterns["bn_buffers.py:sync_bn"]
    [refused] = sync.findings
    assert refused.code == "rank_failed" and refused.evidence["cause"] == "syncbatchnorm_cpu"
    assert not sync.healthy and any("backend nccl" in n for n in sync.notes)


def test_a_hang_is_explained_from_flight_recorder_and_stacks(workspace: Path) -> None:
    ws = _workspace_with_examples(workspace)
    [report] = check_many(
        ["uneven_batches.py:entry"],
        python=Path(sys.executable),
        cwd=ws,
        timeout_s=300,
        hang_s=6,
        py_spy=find_py_spy(),
    )
    assert not report.healthy and not report.completed
    hung = report.findings[0]
    assert hung.code == "job_hung" and hung.step == 1
    assert (
        "rank 0 is in backward (where DDP all-reduces gradients), called at _setup.<locals>.step_fn"
        in hung.message
    )
    assert "rank 1 waits in all_gather_object at trainsleuth's own check" in hung.message
    # the Flight Recorder, read from real dumps of both ranks: rank 1 never entered rank 0's all-reduce
    fr = report.flight_recorder
    assert fr is not None and fr.ranks == [0, 1] and fr.problem is not None
    assert fr.problem.kind == "missing_ranks" and fr.problem.group == "default_pg"
    assert fr.problem.op == "all_reduce" and fr.problem.missing_ranks == [1]
    assert fr.problem.calls[0].call_site is not None and "uneven_batches.py" in fr.problem.calls[0].call_site
    assert fr.problem.elsewhere["1"].startswith(f"#{fr.problem.seq - 1} all_reduce")
    [mismatch] = [f for f in report.findings if f.code == "collective_mismatch"]
    assert mismatch.evidence["source"] == "flight_recorder" and mismatch.evidence["missing_ranks"] == [1]
    # stacks and records side by side for every rank
    states = {s.rank: s for s in report.ranks}
    assert states[0].status == states[1].status == "hung"
    assert states[0].stack_source in ("py-spy", "faulthandler")
    assert any("uneven_batches.py" in frame for frame in states[0].stack)
    assert (
        states[1].collective == "all_gather_object"
        and states[1].where == "trainsleuth's own check (between steps)"
    )
    assert states[0].flight_recorder and "all_reduce" in states[0].flight_recorder
    text = report.render_text()
    assert "stacks and Flight Recorder side by side" in text and "never entered all_reduce" in text


def test_a_rank_that_dies_leaves_its_stack_and_log(workspace: Path) -> None:
    ws = _workspace_with_examples(workspace)
    [report] = check_many(
        ["collective_sizes.py:crash"], python=Path(sys.executable), cwd=ws, timeout_s=300, hang_s=20
    )
    assert not report.completed and not report.healthy
    died = report.findings[0]
    assert died.code == "rank_failed" and died.evidence["rank"] == 0 and died.evidence["exit"] == "SIGABRT"
    assert died.evidence["gloo_size_mismatch"] is True
    assert "collectives with different shapes" in died.message
    states = {s.rank: s for s in report.ranks}
    assert states[0].status == "crashed" and states[0].stack_source == "faulthandler"
    assert states[0].collective == "all_reduce" and "collective_sizes.py" in (states[0].where or "")
    assert "Received data size doesn't match expected size" in (states[0].error or "")
    assert "Fatal Python error: Aborted" in states[0].log_tail
    # the surviving rank: either it saw the peer vanish and its traceback is in its log, or the launcher
    # stopped it first (about 1 run in 10 here) and its stack was taken before; something of it is always there
    assert states[1].status in ("failed", "stopped", "finished")
    assert states[1].log_tail or (states[1].status == "stopped" and states[1].stack)


@pytest.mark.anyio
async def test_over_mcp_the_headline_case_and_bad_inputs(workspace: Path, tmp_path: Path) -> None:
    ws = _workspace_with_examples(workspace)
    outside = tmp_path / "outside.py"
    outside.write_text("def entry():\n    return {}\n")
    elsewhere = tmp_path / "venv-elsewhere"
    elsewhere.mkdir()
    (elsewhere / "python").symlink_to(sys.executable)
    (ws / "x.py").write_text("def entry():\n    return {}\n")
    server, _ = build_server(ServerConfig(workspaces=[ws]))
    async with Client(server) as client:
        r = await client.call_tool("check_distributed", {"entrypoint": "frozen_encoder.py:entry"})
        assert not r.is_error, r.content[0].text
        data = r.structured_content
        assert data["healthy"] is False and data["completed"] is True
        assert data["findings"][0]["module"] == "encoder.0"
        assert "first divergence: frozen parameter encoder.0.weight on rank(s) [1], before wrapping" in (
            r.content[0].text
        )
        r = await client.call_tool("check_distributed", {"entrypoint": "x.py:entry"})
        assert r.is_error and "'model'" in r.content[0].text  # the contract error, not a crash
        r = await client.call_tool("check_distributed", {"entrypoint": f"{outside}:entry"})
        assert r.is_error and "outside the workspace" in r.content[0].text
        r = await client.call_tool("check_distributed", {"entrypoint": "no_colon_here"})
        assert r.is_error and "path/to/file.py:function" in r.content[0].text
        r = await client.call_tool("check_distributed", {"entrypoint": "missing.py:entry"})
        assert r.is_error and "does not exist" in r.content[0].text
        r = await client.call_tool(
            "check_distributed", {"entrypoint": "x.py:entry", "python": str(elsewhere / "python")}
        )
        assert r.is_error and "--allow-python" in r.content[0].text
        r = await client.call_tool("check_distributed", {"entrypoint": "x.py:entry", "nproc": 1})
        assert r.is_error
        r = await client.call_tool("check_distributed", {"entrypoint": "x.py:entry", "hang_s": 1})
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
        workers = [p for p in me.children(recursive=True) if "--worker" in _cmdline(p)]
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

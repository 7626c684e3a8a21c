"""check_distributed command=...: real 2-rank hangs explained from stacks and the Flight Recorder, and a
multi-node launch (two torchrun agents on localhost as two nodes) gathered by node and rank."""

from __future__ import annotations

import socket
from pathlib import Path

from observe_dist_helpers import check, project

from trainsleuth.tools.distributed.check import DistributedReport
from trainsleuth.tools.distributed.failure import RankState
from trainsleuth.tools.findings import Finding


def _hung(report: DistributedReport) -> tuple[Finding, Finding, dict[int, RankState]]:
    assert not report.healthy and not report.completed, report.render_text()
    codes = [f.code for f in report.findings]
    assert codes[:2] == ["job_hung", "collective_mismatch"], codes
    return report.findings[0], report.findings[1], {s.rank: s for s in report.ranks}


def test_uneven_batch_counts_hang_at_the_barrier(tmp_path: Path) -> None:
    ws = project(tmp_path)
    report = check(ws, "torchrun --standalone --nproc_per_node 2 uneven.py", steps=8, hang_s=6.0)
    hung, mismatch, states = _hung(report)
    assert hung.step == 3 and hung.evidence["event"] == "hang"
    assert "rank 0 waits in barrier at <module> (uneven.py:17)" in hung.message
    assert (
        "rank 1 is in backward (where DDP all-reduces gradients), called at <module> (uneven.py:15)"
        in hung.message
    )
    # the Flight Recorder, dumped by every rank on request: the same collective number, two different calls
    ev = mismatch.evidence
    assert ev["source"] == "flight_recorder" and ev["kind"] == "type_mismatch" and ev["group"] == "default_pg"
    assert ev["by_rank"]["0"]["collective"] == "barrier" and ev["by_rank"]["1"]["collective"] == "all_reduce"
    assert (
        ev["by_rank"]["1"]["call_site"] == "<module> (uneven.py:15)"
    )  # the observer's wrappers are see-through
    assert states[0].status == states[1].status == "hung" and states[0].step == states[1].step == 3
    assert states[0].collective == "barrier" and states[0].stack_source in ("py-spy", "faulthandler")
    assert any("uneven.py" in frame for frame in states[1].stack)
    assert states[0].flight_recorder and "barrier" in states[0].flight_recorder
    assert [p.steps for p in report.processes] == [[1, 2, 3], [1, 2, 3]]  # from the digests of killed ranks
    assert "stacks and Flight Recorder side by side" in report.render_text()


def test_a_barrier_inside_if_rank_0_hangs(tmp_path: Path) -> None:
    ws = project(tmp_path)
    report = check(ws, "torchrun --standalone --nproc_per_node 2 barrier_rank0.py", steps=8, hang_s=6.0)
    hung, mismatch, states = _hung(report)
    assert "rank 0 waits in barrier at <module> (barrier_rank0.py:17)" in hung.message
    assert states[0].collective == "barrier" and states[1].collective is None
    assert mismatch.evidence["by_rank"]["0"]["call_site"] == "<module> (barrier_rank0.py:17)"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_torchrun_agents_as_two_nodes(tmp_path: Path) -> None:
    ws = project(tmp_path)
    port = _free_port()
    agent = (
        "torchrun --nnodes 2 --node_rank {n} --nproc_per_node 1 --rdzv-backend c10d "
        f"--rdzv-endpoint localhost:{port} --rdzv-id ts{port} two_ranks.py broken"
    )
    report = check(ws, f"{agent.format(n=0)} & {agent.format(n=1)}; wait")
    assert report.world_size == 2, report.render_text()
    assert sorted((p.node, p.rank, p.local_rank) for p in report.processes) == [(0, 0, 0), (1, 1, 0)]
    assert all(p.reason == "script_ended" and p.steps == [1, 2, 3] for p in report.processes)
    first = report.findings[0]
    assert first.module == "model.features" and first.evidence["differing_ranks"] == [1]
    assert "node 1 rank 1" in report.render_text()

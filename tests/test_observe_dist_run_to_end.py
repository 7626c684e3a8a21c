"""check_distributed command=: the ranks are compared over the first `steps` steps, then the run is watched to
its end, so a hang at the end of an epoch is found; a long healthy run is stopped at timeout_s, not called hung.
And a model first used once training had begun (an EMA copy, a metric) is not said to differ from
initialisation."""

from __future__ import annotations

import json
from pathlib import Path

from observe_dist_helpers import check, project

from trainsleuth.tools.distributed.digests import compare_ranks, findings, read_rank_files


def test_a_hang_after_the_compared_steps_is_found(tmp_path: Path) -> None:
    ws = project(tmp_path)
    report = check(ws, "torchrun --standalone --nproc_per_node 2 late_hang.py", steps=2, hang_s=6.0)
    assert not report.healthy and not report.completed, report.render_text()
    hung = report.findings[0]
    assert hung.code == "job_hung" and hung.step == 6, report.render_text()
    assert "rank 1 waits in barrier at <module> (late_hang.py:18)" in hung.message
    assert (
        "rank 0 is in backward (where DDP all-reduces gradients), called at <module> (late_hang.py:16)"
        in (hung.message)
    )
    assert "collective_mismatch" in [f.code for f in report.findings]
    assert report.steps_taken == 2  # the digests cover the compared steps only


def test_a_long_healthy_run_is_stopped_at_timeout_while_progressing(tmp_path: Path) -> None:
    ws = project(tmp_path)
    report = check(ws, "torchrun --standalone --nproc_per_node 2 long_run.py", steps=2, timeout_s=40.0)
    assert report.healthy and report.completed, report.render_text()
    assert report.findings == []
    assert any("still training at timeout_s=40s" in n for n in report.notes), report.notes


def _rank_file(folder: Path, rank: int, snapshots: list[dict]) -> None:
    process = {
        "type": "process",
        "rank": rank,
        "world_size": 2,
        "node": 0,
        "pid": 100 + rank,
        "rank_env": True,
    }
    lines = [process] + [{"type": "snapshot", **s} for s in snapshots]
    (folder / f"dist-n0-r{rank}-p{100 + rank}.jsonl").write_text(
        "\n".join(json.dumps(x) for x in lines) + "\n"
    )


def test_a_module_first_used_after_training_began_drifts_rather_than_differs_from_init(
    tmp_path: Path,
) -> None:
    def row(name: str, value: float) -> dict:
        return {
            "n": name,
            "k": "buffer",
            "s": [1],
            "d": "float32",
            "v": [value, abs(value), abs(value), abs(value), value],
        }

    for rank in (0, 1):
        _rank_file(
            tmp_path,
            rank,
            [
                {"phase": "first_use", "step": 1, "roots": ["feat"], "tensors": [row("feat.w", 1.0 + rank)]},
                {"phase": "first_use", "step": 3, "roots": ["ema"], "tensors": [row("ema.w", 2.0 + rank)]},
            ],
        )
    comp = compare_ranks(read_rank_files(tmp_path), 1e-6)
    origins = {d.name: d.origin for d in comp.diffs}
    assert origins == {"feat.w": "initialisation", "ema.w": "training"}
    found, _first = findings(comp)
    ema = next(f for f in found if f.evidence.get("tensor") == "ema.w" or "ema.w" in f.message)
    assert "when first used, in step 3 (training had begun" in ema.message
    assert "from initialisation" not in ema.message

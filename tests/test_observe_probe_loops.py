"""The observer's probe through gradient accumulation, mixed precision and torch.compile, on the user's
own command (`tests/data/observe/loops`): each with its bug behind a flag found, and its healthy twin quiet."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from trainsleuth.tools.probe.observed import probe_command
from trainsleuth.tools.probe.report import ProbeReport

LOOPS = Path(__file__).resolve().parent / "data" / "observe" / "loops"


@pytest.fixture(scope="module")
def loops(git_project: Callable[[Path], Path]) -> Path:
    return git_project(LOOPS)


def probe(ws: Path, command: str, steps: int = 4) -> ProbeReport:
    return probe_command(command, python=Path(sys.executable), workspace=ws, steps=steps, timeout_s=600)


def alarms(report: ProbeReport) -> list[tuple[str, str | None]]:
    return [(f.code, f.module) for f in report.findings if f.severity != "info"]


def test_accumulation_zero_grad_inside_the_loop_and_its_twin(loops: Path) -> None:
    broken = probe(loops, "python accum_train.py --zero-grad-inside")
    [f] = broken.findings
    assert f.code == "grad_accumulation_mismatch" and f.evidence["micro_batches"] == 4
    assert "zero_grad() inside the accumulation loop" in f.message
    healthy = probe(loops, "python accum_train.py")
    assert healthy.healthy, alarms(healthy)
    # the loss of an optimizer step is what the run backpropagated over its 4 micro-batches
    assert all(isinstance(x, float) and 1.0 < x < 2.0 for x in healthy.losses)


def test_bf16_autocast_and_fp16_grad_scaler(loops: Path) -> None:
    bf16 = probe(loops, "python amp_train.py --dtype bf16")
    assert bf16.healthy, alarms(bf16)
    fp16 = probe(loops, "python amp_train.py --dtype fp16", steps=6)
    assert fp16.healthy, alarms(fp16)  # steps the scaler skipped are not a NaN gradient
    assert all(isinstance(x, float) for x in fp16.losses)
    broken = probe(loops, "python amp_train.py --dtype fp16 --broken")
    [f] = broken.findings
    assert (f.code, f.module) == ("loss_broadcast", "4")
    assert f.evidence["prediction_shape"] == [32, 1] and f.evidence["target_shape"] == [32]
    assert f.evidence["where"].startswith("amp_train.py:")


def test_torch_compile_dead_pair_found_and_twin_quiet(loops: Path) -> None:
    broken = probe(loops, "python compile_train.py --zero-both")
    [f] = broken.findings
    assert f.code == "no_gradient" and f.evidence["zero_factors"] == ["2.weight", "4.weight"]
    assert broken.models[0]["compiled"] is True and broken.models[0]["wrappers"] == ["torch.compile"]
    assert any("compiled" in n and "activations" in n for n in broken.notes)  # what it could not see
    rows = {r["name"]: r for r in broken.params}
    assert "2.weight" in rows and "_orig_mod" not in "".join(rows)  # named as the user sees them
    healthy = probe(loops, "python compile_train.py")
    assert healthy.healthy, alarms(healthy)


def test_a_large_model_has_its_updates_measured_every_other_step(loops: Path) -> None:
    """The copy of every weight before each step is most of the probe's cost on a large model
    (benchmarks/observe.py): above 5M weights updates are measured at every other observed step, and the
    report says so; a small model's at every step."""
    large = probe(loops, "python wide_train.py 2400", steps=6)
    small = probe(loops, "python wide_train.py 64", steps=6)
    assert large.healthy and small.healthy, (large.findings, small.findings)
    assert {r["changed_steps"] for r in large.params if r.get("changed_steps") is not None} == {3}
    assert {r["changed_steps"] for r in small.params if r.get("changed_steps") is not None} == {6}
    assert any("measured at every other observed step" in n for n in large.notes), large.notes
    assert not any("every other observed step" in n for n in small.notes)

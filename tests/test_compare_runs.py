"""compare_runs on real run pairs: a tiny GPT really trained by tests/data/compare/make_runs.py
(healthy seeds 0/1/2, a changed lr schedule, a resume without optimizer state, the same runs
logged every 5th step to CSV), plus real public logs and broken inputs."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import pytest

from trainsleuth.tools.compare.plot import render_png
from trainsleuth.tools.compare.report import compare_runs, render_text
from trainsleuth.tools.compare.runs import RunInputError, load_run

RUNS = Path(__file__).resolve().parent / "data" / "compare" / "runs"
BLOOM = Path(__file__).resolve().parents[2] / "shared" / "realworld" / "bloom"


def _cmp(good: str, bad: str, *more: str, **kw: object):  # type: ignore[no-untyped-def]
    return compare_runs(RUNS / good, RUNS / bad, more_good=[RUNS / m for m in more], **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("good", "bad"), list(itertools.permutations(["base_s0", "base_s1", "base_s2"], 2)))
def test_a_changed_seed_is_within_noise(good: str, bad: str) -> None:
    report = _cmp(good, bad).report
    assert report.verdict == "within_noise", render_text(report)
    assert "Within noise" in report.summary
    assert not [f for f in report.findings if f.severity != "info"]
    lr = next(m for m in report.metrics if m.role == "lr")
    assert lr.status == "identical"  # the schedule is configuration: compared exactly
    seed = next(d for d in report.differences if d.item == "seed")
    assert seed.category == "seed" and seed.score < 0.5
    assert report.bisect is None


def test_a_changed_lr_schedule_diverges_lr_first_then_loss() -> None:
    report = _cmp("base_s0", "lr_const").report
    assert report.verdict == "diverged"
    first = report.first_divergence
    assert first is not None and first.role == "lr" and first.first_step == 1
    assert first.direction == "higher" and first.bad_value == pytest.approx(8e-3)
    assert report.order[0] == "lr@1"
    loss = next(m for m in report.metrics if m.metric == "loss")
    assert loss.status == "diverged" and loss.direction == "lower" and loss.first_step is not None
    assert loss.first_step >= first.first_step
    # the differences that explain an lr divergence come first, the bookkeeping ones are left out
    top = [d.item for d in report.differences[:3]]
    assert set(top) == {"lr_schedule", "warmup_steps", "optimizer.lr"}, top
    assert all("output_dir" not in d.item for d in report.differences)
    assert report.bookkeeping_differences >= 1
    finding = report.findings[0]
    assert finding.code == "run_divergence" and finding.severity == "warning" and finding.metric == "lr"
    assert finding.step == 1 and finding.evidence["order"][0] == "lr@1"
    assert "lr-schedule-misconfigured" in finding.failure_modes
    assert report.suggestions[0].id == "lr-schedule-misconfigured"


def test_a_resume_without_optimizer_state_parts_right_after_the_restart() -> None:
    report = _cmp("base_s0", "resume_noopt").report
    assert report.restart_steps == [121]
    assert report.verdict == "parted", render_text(report)
    loss = next(m for m in report.metrics if m.metric == "loss")
    assert loss.identical_until == 121 and loss.parts_at == 122
    assert "right after the run under test restarts at step 121" in report.summary
    warn = [f for f in report.findings if f.severity == "warning"]
    assert {f.evidence.get("kind") for f in warn} >= {"replay_differs"}
    assert all("optimizer-state-not-restored" in f.failure_modes for f in warn)
    replay = next(f for f in warn if f.evidence.get("kind") == "replay_differs")
    assert replay.step == 122 and replay.evidence["replayed_steps"] == [121, 150]
    assert report.differences[0].item == "resume_from"
    assert report.suggestions[0].id == "optimizer-state-not-restored"
    assert any("check_resume" in n for n in report.notes)


def test_a_different_logging_interval_and_format() -> None:
    same = _cmp("base_s0", "base_s0_csv5").report  # JSON lines every step vs CSV every 5th
    assert same.verdict == "identical", render_text(same)
    pairs = {(m.good_metric, m.metric) for m in same.metrics}
    assert pairs == {("loss", "train/loss"), ("lr", "train/lr"), ("grad_norm", "train/grad_norm"),
                     ("val_loss", "val/loss")}  # fmt: skip
    assert next(d for d in same.differences if d.item == "log_every").category == "logging"
    back = _cmp("base_s0_csv5", "base_s0").report  # the sparse log as the good run
    assert back.verdict == "identical"
    changed = _cmp("base_s0", "lr_const_csv5").report
    assert changed.verdict == "diverged" and changed.order[0] == "train/lr@5"
    assert changed.first_divergence is not None and changed.first_divergence.good_metric == "lr"


def test_several_good_runs_give_the_band() -> None:
    assert _cmp("base_s0", "base_s2", "base_s1").report.verdict == "within_noise"
    report = _cmp("base_s0", "lr_const", "base_s1", "base_s2").report
    assert report.verdict == "diverged" and report.order[0] == "lr@1"
    assert "spread of 3 good runs" in report.summary
    assert len(report.more_good) == 2


def test_plot_marks_the_divergence() -> None:
    result = _cmp("base_s0", "lr_const")
    png = render_png(result.plot_pairs, 1.0, ("good", "under test"))
    assert png is not None and png.startswith(b"\x89PNG") and len(png) > 10_000


def test_different_lengths_compare_the_overlap(tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.mkdir()
    lines = (RUNS / "lr_const" / "metrics.jsonl").read_text().splitlines()[:80]
    (short / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    report = compare_runs(RUNS / "base_s0", short).report
    assert report.verdict == "diverged" and report.order[0] == "lr@1"
    loss = next(m for m in report.metrics if m.metric == "loss")
    assert loss.compared == 80
    longer = compare_runs(short, RUNS / "base_s0").report  # the good run is the short one
    assert longer.verdict == "diverged"
    assert next(m for m in longer.metrics if m.metric == "loss").compared == 80


def test_nan_in_the_run_under_test_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "nan.jsonl"
    rows = [json.loads(x) for x in (RUNS / "base_s1" / "metrics.jsonl").read_text().splitlines()]
    for r in rows:
        if r["step"] >= 200:
            r["loss"] = float("nan")
    bad.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = compare_runs(RUNS / "base_s0", bad).report
    assert report.verdict == "diverged"
    first = report.first_divergence
    assert first is not None and first.metric == "loss" and first.first_step == 200
    assert first.direction == "nonfinite" and first.bad_value == "nan/inf"
    assert report.findings[0].severity == "error"
    assert "nonfinite_metric" not in report.findings[0].failure_modes  # failure modes, not codes
    assert (
        "fp16-overflow" in report.findings[0].failure_modes
        or "log-of-zero" in report.findings[0].failure_modes
    )


def test_nothing_in_common_is_not_comparable_never_healthy(tmp_path: Path) -> None:
    other = tmp_path / "rl.jsonl"
    other.write_text(
        "".join(json.dumps({"step": i, "reward": i * 0.1, "kl": 0.01}) + "\n" for i in range(50))
    )
    report = compare_runs(RUNS / "base_s0", other).report
    assert report.verdict == "not_comparable"
    assert "Nothing was judged" in report.summary and "reward" in report.summary
    wanted = _cmp("base_s0", "base_s1", metrics=["perplexity"]).report
    assert wanted.verdict == "not_comparable"
    assert any("perplexity" in n for n in wanted.notes)


def test_real_public_logs(tmp_path: Path) -> None:
    """BLOOM Megatron records (real, messy): a log against itself is identical; the 104B run whose
    loss jumped at 17062 against a copy without that stretch diverges there, loss scale following."""
    if not BLOOM.is_dir():
        pytest.skip("the shared real-world logs are not beside this checkout")
    log = BLOOM / "tr8b-104B.log"
    same = compare_runs(log, log).report
    assert same.verdict == "identical"
    assert {m.role for m in same.metrics} >= {"loss", "lr", "grad_norm", "loss_scale"}
    # the good run: the same records with the jump left out (iterations 17062 onwards)
    good = tmp_path / "good.log"
    kept = [ln for ln in log.read_text().splitlines() if "iteration" not in ln or _iteration(ln) < 17062]
    good.write_text("\n".join(kept) + "\n")
    assert compare_runs(good, log).report.verdict == "identical"  # no overlap beyond 17061


def _iteration(line: str) -> int:
    import re

    m = re.search(r"iteration\s+(\d+)", line)
    return int(m.group(1)) if m else 0


def test_inputs_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(RunInputError, match="no such file"):
        load_run(tmp_path / "missing.log")
    empty = tmp_path / "empty_run"
    empty.mkdir()
    with pytest.raises(RunInputError, match="holds no training log"):
        load_run(empty)
    binary = tmp_path / "weights.log"
    binary.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(RunInputError, match="binary"):
        load_run(binary)


def test_run_folder_picks_the_log_not_the_config(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(RUNS / "base_s0", run)
    (run / "notes.txt").write_text("tried a higher lr next\n")
    loaded = load_run(run)
    assert Path(loaded.log_file or "").name == "metrics.jsonl"
    assert set(loaded.curves) == {"loss", "lr", "grad_norm", "val_loss"}
    assert any("metrics.jsonl" in n and "notes.txt" in n for n in loaded.notes)


def test_two_real_probe_reports(tmp_path: Path) -> None:
    """`trainsleuth probe --json` of the same model with lr 1e-3 and with lr 1.0 (a missing '1e-3 *')."""
    import subprocess
    import sys

    src = (Path(__file__).resolve().parent.parent / "examples" / "probe" / "broken_lr_high.py").read_text()
    (tmp_path / "high.py").write_text(src)
    (tmp_path / "fixed.py").write_text(src.replace("lr=1.0", "lr=1e-3"))
    for name in ("high", "fixed"):
        out = subprocess.run(
            [sys.executable, "-m", "trainsleuth", "probe", f"{name}.py:broken", "--steps", "5", "--json"],
            cwd=tmp_path, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        (tmp_path / f"{name}.json").write_text(out.stdout)
    report = compare_runs(tmp_path / "fixed.json", tmp_path / "high.json").report
    assert report.verdict == "diverged", render_text(report)
    assert report.order[:2] == ["grad_norm@2", "loss@2"]  # grad norm named first at a tie
    assert "lr-too-high" in [s.id for s in report.suggestions]
    assert any(e.startswith("update_ratio_high") for e in report.events_only_in_bad)

"""Each event's step is where the change starts (findings.md), not where a window confirmed it;
the confirming step stays in evidence as `confirmed_step`."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from trainsleuth.tools.findings import Finding
from trainsleuth.tools.logs import analyze
from trainsleuth.tools.logs.analyze import LogReport


def _write(path: Path, records: list[dict[str, float]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _base(n: int = 200, seed: int = 0) -> list[dict[str, float]]:
    rng = random.Random(seed)
    return [{"step": i * 10, "loss": 2.0 * math.exp(-i / 80) + 1.0 + rng.gauss(0, 0.02)} for i in range(n)]


def _events(report: LogReport, code: str) -> list[Finding]:
    found = [e for e in report.events if e.code == code]
    assert found, f"no {code} in {[e.one_line() for e in report.events]}"
    return found


def _loud_codes(report: LogReport) -> set[str]:
    return {e.code for e in report.events if e.severity != "info"}


def test_throughput_drop_names_the_first_slow_record(tmp_path: Path) -> None:
    rng = random.Random(11)
    recs = _base(200)
    for i, r in enumerate(recs):
        r["tokens_per_sec"] = (52000 if i < 120 else 31000) * (1 + rng.gauss(0, 0.015))
    report = analyze(_write(tmp_path / "a.jsonl", recs))
    (e,) = _events(report, "throughput_drop")
    assert e.step == 1200 and e.metric == "tokens_per_sec"
    assert e.evidence["confirmed_step"] > 1200  # the trailing median crossed later
    assert "from step 1200 on" in e.message
    assert _loud_codes(report) == {"throughput_drop"}


def test_step_time_rise_names_the_first_slow_record(tmp_path: Path) -> None:
    rng = random.Random(12)
    recs = _base(240)
    for i, r in enumerate(recs):
        r["step_time_ms"] = (810.0 if i < 170 else 1390.0) * (1 + rng.gauss(0, 0.01))
    (e,) = _events(analyze(_write(tmp_path / "a.jsonl", recs)), "throughput_drop")
    assert e.step == 1700 and e.metric == "step_time_ms" and e.evidence["confirmed_step"] > 1700


def test_slow_divergence_starts_at_the_knee(tmp_path: Path) -> None:
    rng = random.Random(13)
    recs = []
    for i in range(300):
        loss = 3.4 + 7.5 * math.exp(-i / 25)
        if i > 180:
            loss += 0.028 * (i - 180)
        recs.append({"step": i * 10, "loss": loss * (1 + rng.gauss(0, 0.015))})
    report = analyze(_write(tmp_path / "a.jsonl", recs))
    (e,) = _events(report, "divergence")
    assert e.step is not None and 1780 <= e.step <= 1880, e.one_line()  # the rise starts after step 1800
    assert e.evidence["confirmed_step"] >= e.step + 100
    assert f"rises steadily from step {e.step}" in e.message


def test_ramped_divergence_starts_where_the_loss_leaves_its_level(tmp_path: Path) -> None:
    recs = _base()
    for k, r in enumerate(recs[150:]):
        r["loss"] += min(3.0, 0.5 * (k + 1))  # climbs over six records, then stays up
    report = analyze(_write(tmp_path / "a.jsonl", recs))
    (e,) = _events(report, "divergence")
    assert e.step == 1500 and e.evidence["before_step"] == 1490
    assert e.evidence["confirmed_step"] >= 1500
    assert "loss_spike" not in _loud_codes(report)


def test_abrupt_divergence_keeps_its_jump_step(tmp_path: Path) -> None:
    recs = _base()
    for r in recs[160:]:
        r["loss"] += 3.0
    (e,) = _events(analyze(_write(tmp_path / "a.jsonl", recs)), "divergence")
    assert e.step == 1600 and e.evidence["confirmed_step"] == 1600


def test_ramped_loss_spike_starts_with_its_rise(tmp_path: Path) -> None:
    recs = _base()
    for k, bump in enumerate([0.3, 0.6, 2.5, 1.0]):
        recs[100 + k]["loss"] += bump
    report = analyze(_write(tmp_path / "a.jsonl", recs))
    (e,) = _events(report, "loss_spike")
    assert e.step == 1000 and e.evidence["confirmed_step"] > 1000
    assert e.evidence["peak_step"] == 1020 and e.evidence["recovered"]
    assert "divergence" not in _loud_codes(report)


def test_overfitting_starts_after_the_best_evaluation(tmp_path: Path) -> None:
    recs = []
    for i in range(300):
        recs.append({"step": i, "loss": 2.0 * math.exp(-i / 60) + 0.1})
        if i % 30 == 29:
            recs.append({"step": i, "eval_loss": 1.0 + ((i - 120) / 100) ** 2})
    (e,) = _events(analyze(_write(tmp_path / "a.jsonl", recs)), "overfitting")
    best = e.evidence["best_step"]
    assert e.step == best + 30  # the next evaluation
    assert e.evidence["confirmed_step"] >= e.step


def test_oscillation_starts_where_the_alternation_does(tmp_path: Path) -> None:
    recs = [{"step": i * 10, "loss": 3.0 - 0.01 * i} for i in range(60)]
    recs += [{"step": (60 + i) * 10, "loss": 2.0 if i % 2 else 1.0} for i in range(140)]
    (e,) = _events(analyze(_write(tmp_path / "a.jsonl", recs)), "oscillation")
    assert e.step is not None and 600 <= e.step <= 610 and e.evidence["confirmed_step"] == 1000


def test_healthy_shapes_stay_quiet_with_onset_search(tmp_path: Path) -> None:
    """A noisy throughput, an lr-step loss drop and a warmup bump give no warning or error."""
    rng = random.Random(14)
    recs = []
    for i in range(400):
        loss = 2.0 + 6.0 * math.exp(-i / 40) + (0.0 if i < 250 else -0.4) + rng.gauss(0, 0.05)
        recs.append(
            {
                "step": i * 10,
                "loss": loss,
                "tokens_per_sec": (40000 if i < 5 else 50000) * (1 + rng.gauss(0, 0.05)),
            }
        )
    report = analyze(_write(tmp_path / "a.jsonl", recs))
    assert _loud_codes(report) == set(), [e.one_line() for e in report.events]

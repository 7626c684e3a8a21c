"""Detectors: healthy runs of several shapes stay quiet; each problem is found with its step."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from trainsleuth.tools.findings import LOG_CODES
from trainsleuth.tools.logs import analyze


def _write(path: Path, records: list[dict]) -> Path:  # type: ignore[type-arg]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _loud(report) -> list[str]:  # type: ignore[no-untyped-def]
    return [e.one_line() for e in report.events if e.severity != "info"]


def healthy_noisy(rng: random.Random, n: int = 400) -> list[dict]:  # type: ignore[type-arg]
    out = []
    for i in range(n):
        step = i * 10
        loss = 3.0 * math.exp(-step / 1500) + 1.6 + rng.gauss(0, 0.08)
        out.append(
            {
                "step": step,
                "loss": loss,
                "grad_norm": math.exp(rng.gauss(0, 0.25)),
                "lr": 3e-4 * 0.5 * (1 + math.cos(math.pi * i / n)),
                "tokens_per_sec": 50000 * (1 + rng.gauss(0, 0.04)),
            }
        )
    return out


def healthy_warmup_fp16(rng: random.Random, n: int = 400) -> list[dict]:  # type: ignore[type-arg]
    out = []
    scale = 65536.0
    for i in range(n):
        step = i * 5
        warm = min(1.0, step / 300)
        loss = (
            10.5 - 0.3 * warm
            if step < 300
            else 2.2 + 8.0 * math.exp(-(step - 300) / 200) + rng.gauss(0, 0.05)
        )
        loss += rng.gauss(0, 0.03)
        gn = 8.0 * math.exp(-step / 150) + 0.6 + abs(rng.gauss(0, 0.1))
        if i < 3:
            scale /= 2  # the initial loss-scale search
        elif i % 100 == 0:
            scale *= 2
        elif rng.random() < 0.004:
            scale /= 2  # an isolated overflow
        out.append(
            {
                "step": step,
                "loss": loss,
                "grad_norm": gn,
                "lr": 1e-3 * warm,
                "loss_scale": scale,
                "step_time": 0.5 + (1.5 if i < 2 else 0) + abs(rng.gauss(0, 0.02)),
            }
        )
    return out


def healthy_eval_every_n(rng: random.Random, n: int = 600) -> list[dict]:  # type: ignore[type-arg]
    out = []
    for i in range(n):
        step = i * 10
        lr_factor = 1.0 if step < 3000 else (0.1 if step < 4500 else 0.01)  # step schedule
        drop = 0.0 if step < 3000 else (0.3 if step < 4500 else 0.4)
        train = 1.2 * math.exp(-step / 1000) + 0.9 - drop + rng.gauss(0, 0.04)
        rec = {
            "step": step,
            "train_loss": train,
            "lr": 0.1 * lr_factor,
            "step_time": 0.2 + abs(rng.gauss(0, 0.01)),
        }
        if i % 50 == 49:
            rec["step_time"] = 6.0  # the eval pause
            out.append(rec)
            out.append(
                {"step": step, "val_loss": train + 0.08 + rng.gauss(0, 0.01), "val_acc": 0.6 + step / 20000}
            )
        else:
            out.append(rec)
    return out


def healthy_rl(rng: random.Random, n: int = 500) -> list[dict]:  # type: ignore[type-arg]
    out = []
    for i in range(n):
        out.append(
            {
                "global_step": i,
                "reward": -50 + 100 * (1 - math.exp(-i / 150)) + rng.gauss(0, 25),
                "kl": abs(rng.gauss(0.02, 0.015)),
                "policy_loss": rng.gauss(0, 0.05) * (3 if rng.random() < 0.05 else 1),
                "value_loss": abs(rng.gauss(1.0, 0.6)) * math.exp(-i / 400),
                "entropy": 1.5 - i / 1000 + rng.gauss(0, 0.02),
            }
        )
    return out


def healthy_converged(rng: random.Random, n: int = 500) -> list[dict]:  # type: ignore[type-arg]
    # falls, then sits flat for the last half; accuracy reaches 100 % and stays there
    return [
        {
            "step": i,
            "loss": max(0.05, 2.0 * math.exp(-i / 40)) + abs(rng.gauss(0, 0.005)),
            "accuracy": min(1.0, 0.5 + i / 200),
            "grad_norm": 0.3 + abs(rng.gauss(0, 0.05)),
        }
        for i in range(n)
    ]


@pytest.mark.parametrize(
    "shape", [healthy_noisy, healthy_warmup_fp16, healthy_eval_every_n, healthy_rl, healthy_converged]
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_healthy_runs_have_no_warning_or_error(tmp_path: Path, shape, seed: int) -> None:  # type: ignore[no-untyped-def]
    report = analyze(_write(tmp_path / "run.jsonl", shape(random.Random(seed))))
    assert report.has_metrics
    assert _loud(report) == []
    assert report.healthy


def _base(n: int = 200, seed: int = 0) -> list[dict]:  # type: ignore[type-arg]
    rng = random.Random(seed)
    return [
        {
            "step": i * 10,
            "loss": 2.0 * math.exp(-i / 80) + 1.0 + rng.gauss(0, 0.02),
            "grad_norm": 1.0 + abs(rng.gauss(0, 0.05)),
        }
        for i in range(n)
    ]


def _event(report, code: str):  # type: ignore[no-untyped-def]
    found = [e for e in report.events if e.code == code]
    assert found, f"no {code} in {[e.one_line() for e in report.events]}"
    return found[0]


def test_nonfinite_loss_is_an_error_at_its_first_step(tmp_path: Path) -> None:
    recs = _base()
    for r in recs[150:]:
        r["loss"] = float("nan")
    report = analyze(_write(tmp_path / "a.jsonl", recs))
    e = _event(report, "nonfinite_metric")
    assert (e.severity, e.step, e.metric, e.evidence["count"]) == ("error", 1500, "loss", 50)


def test_loss_spike_with_leading_grad_norm_spike(tmp_path: Path) -> None:
    recs = _base()
    for k, g in enumerate([3.0, 8.0, 30.0, 90.0, 40.0, 5.0]):
        recs[100 + k]["grad_norm"] = g
    recs[103]["loss"] += 2.0
    recs[104]["loss"] += 1.0
    report = analyze(_write(tmp_path / "a.jsonl", recs))
    spike = _event(report, "loss_spike")
    assert spike.step == 1030 and spike.severity == "warning" and spike.evidence["recovered"]
    grad = _event(report, "grad_norm_spike")
    assert grad.step == 1000 and grad.evidence["leads_loss_spike_by"] == 30
    assert not [e for e in report.events if e.code == "divergence"]


def test_divergence_jump_that_stays(tmp_path: Path) -> None:
    recs = _base()
    for r in recs[160:]:
        r["loss"] += 3.0
    report = analyze(_write(tmp_path / "a.jsonl", recs))
    e = _event(report, "divergence")
    assert e.step == 1600 and e.severity == "error"
    assert not [x for x in report.events if x.code == "loss_spike"]


def test_divergence_slow_rise(tmp_path: Path) -> None:
    recs = _base(300)
    for i, r in enumerate(recs[150:]):
        r["loss"] = 1.2 + i * 0.01
    report = analyze(_write(tmp_path / "a.jsonl", recs))
    e = _event(report, "divergence")
    assert 1500 <= e.step <= 2600


def test_plateau_no_progress(tmp_path: Path) -> None:
    rng = random.Random(3)
    recs = [{"step": i, "loss": 6.9 + rng.gauss(0, 0.05)} for i in range(300)]
    e = _event(analyze(_write(tmp_path / "a.jsonl", recs)), "plateau")
    assert e.severity == "warning" and e.metric == "loss"


def test_constant_metric_frozen_loss(tmp_path: Path) -> None:
    recs = _base()
    for r in recs[50:]:
        r["loss"] = 2.302585
    e = _event(analyze(_write(tmp_path / "a.jsonl", recs)), "constant_metric")
    assert e.step == 500 and e.evidence["records"] == 150


def test_oscillation(tmp_path: Path) -> None:
    recs = [{"step": i, "loss": (1.0 if i % 2 else 2.0) + 0.001 * (i % 7)} for i in range(200)]
    e = _event(analyze(_write(tmp_path / "a.jsonl", recs)), "oscillation")
    assert e.evidence["alternation"] >= 0.9


def test_overfitting(tmp_path: Path) -> None:
    recs = []
    for i in range(300):
        recs.append({"step": i, "loss": 2.0 * math.exp(-i / 60) + 0.1})
        if i % 30 == 29:
            recs.append({"step": i, "eval_loss": 1.0 + ((i - 120) / 100) ** 2})
    e = _event(analyze(_write(tmp_path / "a.jsonl", recs)), "overfitting")
    assert e.metric == "eval_loss" and e.evidence["best_step"] in (89, 119, 149)


def test_loss_scale_collapse_to_minimum(tmp_path: Path) -> None:
    recs = _base(60)
    scale = 1024.0
    for i, r in enumerate(recs):
        if i == 20:
            scale = 2048.0
        if i > 40 and scale > 1:
            scale /= 2
        r["loss_scale"] = scale
    report = analyze(_write(tmp_path / "a.jsonl", recs))
    e = _event(report, "loss_scale_collapse")
    assert e.severity == "error" and e.evidence["end_scale"] == 1.0
    skipped = _event(report, "skipped_steps")
    assert skipped.severity == "warning"


def test_skipped_steps_from_deepspeed_overflow_lines(tmp_path: Path) -> None:
    lines = []
    for i in range(100):
        if 60 <= i < 66:
            lines.append(
                f"[2024-01-01 00:00:00] [INFO] [stage_1_and_2.py:1800] [Rank 0] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {2 ** (16 - i + 60)}, reducing to {2 ** (15 - i + 60)}"
            )
        lines.append(f"step={i} loss={2 - i / 200:.4f} lr=1e-4")
    report = analyze(_write_text(tmp_path / "ds.log", lines))
    e = _event(report, "skipped_steps")
    assert e.severity == "warning" and e.evidence["count"] == 6


def _write_text(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_throughput_drop(tmp_path: Path) -> None:
    rng = random.Random(5)
    recs = _base(200)
    for i, r in enumerate(recs):
        r["tokens_per_sec"] = (50000 if i < 120 else 24000) * (1 + rng.gauss(0, 0.03))
    e = _event(analyze(_write(tmp_path / "a.jsonl", recs)), "throughput_drop")
    assert 1150 <= e.step <= 1300 and e.metric == "tokens_per_sec"


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB", "cuda_oom"),
        (
            "[rank3]:[E ProcessGroupNCCL.cpp:563] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
            "nccl_timeout",
        ),
        (
            "[2024] [INFO] [loss_scaler.py:183] Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
            "min_loss_scale",
        ),
        (
            "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
            "min_loss_scale",
        ),
        ("AssertionError: labels must be < num_classes", "assertion"),
        ("Killed", "killed"),
        (
            "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 1234 bytes.",
            "cpu_oom",
        ),
    ],
)
def test_error_lines_are_extracted(tmp_path: Path, line: str, kind: str) -> None:
    lines = [f"step {i} | loss {2 - i / 100:.3f}" for i in range(20)] + [line]
    report = analyze(_write_text(tmp_path / "e.log", lines))
    errs = [e for e in report.events if e.code == "error_message"]
    assert [e.evidence["kind"] for e in errs] == [kind]
    assert errs[0].severity == "error" and errs[0].step == 19 and errs[0].evidence["line"] == 21


def test_traceback_reports_its_exception(tmp_path: Path) -> None:
    lines = [
        "step 1 | loss 2.0",
        "Traceback (most recent call last):",
        '  File "train.py", line 3, in <module>',
        "    main()",
        "ValueError: Expected input batch_size (4) to match target batch_size (8).",
    ]
    report = analyze(_write_text(tmp_path / "t.log", lines))
    tb = next(e for e in report.events if e.evidence.get("kind") == "traceback")
    assert "ValueError: Expected input batch_size" in tb.evidence["exception"]
    assert tb.evidence["line"] == 2


def test_every_event_code_is_a_log_code_with_links(tmp_path: Path) -> None:
    recs = _base()
    recs[120]["loss"] = float("inf")
    report = analyze(_write(tmp_path / "a.jsonl", recs))
    assert report.events
    for e in report.events:
        assert e.code in LOG_CODES
        assert isinstance(e.failure_modes, list)

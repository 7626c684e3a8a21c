"""lr_warmup_unfinished: a run whose learning rate is still warming up when it ends.

The logs are printed the way the agent benchmark's warmup_schedule prints them (`step N loss L lr R`
text lines between `epoch E val_acc A` lines), from the schedule's own formula: linear warmup over
200 optimizer steps, cosine to 0 at the end, 64 optimizer steps per epoch.
"""

from __future__ import annotations

import math
from pathlib import Path

from trainsleuth.tools.logs import analyze

PEAK, WARMUP, PER_EPOCH, EPOCHS = 2e-3, 200, 64, 8
TOTAL = PER_EPOCH * EPOCHS


def _factor(i: int, warmup: int = WARMUP, total: int = TOTAL) -> float:
    if i < warmup:
        return (i + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * min(1.0, (i - warmup) / max(1, total - warmup))))


def _log(path: Path, lr_at_step) -> Path:  # type: ignore[no-untyped-def]
    lines = []
    for step in range(1, TOTAL + 1):
        if step % 32 == 0:
            loss = 2.3 * math.exp(-step / 400) + 0.05
            lines.append(f"step {step} loss {loss:.4f} lr {lr_at_step(step):.2e}")
        if step % PER_EPOCH == 0:
            lines.append(f"epoch {step // PER_EPOCH} val_acc {0.5 + 0.05 * step / PER_EPOCH:.4f}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_schedule_stepped_once_per_epoch_is_found(tmp_path: Path) -> None:
    # sched.step() after the batch loop: the schedule's index is the number of finished epochs
    report = analyze(_log(tmp_path / "train.log", lambda step: PEAK * _factor((step - 1) // PER_EPOCH)))
    (f,) = [e for e in report.events if e.code == "lr_warmup_unfinished"]
    assert f.severity == "warning" and f.metric == "lr" and not report.healthy
    assert f.evidence["first_value"] == 1e-5 and f.evidence["last_value"] == 8e-5
    assert f.evidence["changes"] == 7 and f.evidence["steps_per_change"] == 64 and f.evidence["records"] == 16
    assert "still rising at its last records" in f.message and "every 64 steps" in f.message


def test_a_warmup_that_finishes_is_quiet(tmp_path: Path) -> None:
    # the same schedule stepped after every optimizer step: warmup done at step 200, then cosine
    report = analyze(_log(tmp_path / "fixed.log", lambda step: PEAK * _factor(step - 1)))
    assert [e.code for e in report.events if e.severity != "info"] == []


def test_warmup_into_a_constant_rate_and_a_log_of_one_value_are_quiet(tmp_path: Path) -> None:
    held = analyze(_log(tmp_path / "held.log", lambda step: PEAK * min(1.0, step / WARMUP)))
    assert not [e for e in held.events if e.code == "lr_warmup_unfinished"]
    flat = analyze(_log(tmp_path / "flat.log", lambda step: PEAK))
    assert not [e for e in flat.events if e.code == "lr_warmup_unfinished"]


def test_a_healthy_warmup_printed_with_rounding_is_quiet(tmp_path: Path) -> None:
    # llm.c's format, 6 decimals: a per-step warmup logged before it ends repeats values by rounding
    path = tmp_path / "llmc.log"
    path.write_text(
        "".join(f"s:{i} trl:{10 - i / 100:.4f} lr:{6e-4 * (i + 1) / 700:.6f}\n" for i in range(261))
    )
    report = analyze(path)
    assert report.roles["lr"] == ["lr"]  # the lr column was read, and judged quiet
    assert not [e for e in report.events if e.code == "lr_warmup_unfinished"]

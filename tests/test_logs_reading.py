"""Issue 16 and 22.5: the reader on the shapes real logs have. Line shapes follow the public print
formats of each codebase (llm.c's train_gpt2 `print0`, modded-nanogpt's `print0`, argparse, Keras);
the corpus in tests/data/realworld_logs holds the real files."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from trainsleuth.tools.logs import LogInputError, analyze, extract
from trainsleuth.tools.logs import skips as skip_reasons


def _w(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_llmc_console_units_thousands_and_step_fraction(tmp_path: Path) -> None:
    # llm.c train_gpt2.py: step {step+1:4d}/{n} | train loss {:.6f} | norm {:.4f} | lr {:.2e} | ({:.2f} ms | {:.0f} tok/s)
    lines = [
        f"step {i:4d}/19560 | train loss {4.0 - i * 0.01:.6f} | norm {1.2 + (i % 3) * 0.01:.4f} | lr 6.00e-04 | "
        f"({16.3 + i % 2:.2f} ms | {47831 + i:,} tok/s)"
        for i in range(1, 61)
    ]
    r = analyze(_w(tmp_path / "train.log", "\n".join(lines) + "\n"))
    series = {s.name: s for s in r.series}
    assert set(series) >= {"train loss", "norm", "lr", "time (ms)", "tok/s"}
    assert all("/" not in name or name == "tok/s" for name in series)  # `step 120/19560` is no metric
    assert series["train loss"].points == 60 and series["train loss"].first_step == 1
    assert series["tok/s"].first == 47832.0  # not 47
    assert r.parse.judged == ["train loss"] and r.parse.roles["norm"] == "grad_norm"
    assert r.parse.step_source == {"step N/TOTAL": 60}
    assert r.verdict == "healthy"


def test_values_followed_by_units_are_read(tmp_path: Path) -> None:
    lines = [
        f"epoch {e} | train_loss: {2.0 - e * 0.1:.4f} | val_acc: {50 + e * 3:.1f} % | time: 12.3 min | mem 3.2 GB | 45 ms"
        for e in range(1, 11)
    ]
    r = analyze(_w(tmp_path / "t.log", "\n".join(lines) + "\n"))
    series = {s.name: s for s in r.series}
    assert series["val_acc"].last == 80.0 and series["val_acc"].role == "val_accuracy"
    assert series["time"].first == 12.3 and series["mem"].first == 3.2
    assert r.parse.units == {"val_acc": "%", "time": "min", "mem": "GB"}
    assert series["train_loss"].first_step == 1 and series["train_loss"].last_step == 10


def test_reported_case_unit_after_val_metric_and_flat_loss_is_not_healthy(tmp_path: Path) -> None:
    """Issue 22: a clearly broken run was called healthy: its validation metric carried a unit and
    its training loss was flat from the first epoch."""
    lines = [
        f"Epoch {e}/20 - train_loss: {0.6931 + (e % 3) * 0.0002:.4f} - val_accuracy: 50.0 % - 45 ms/step"
        for e in range(1, 21)
    ]
    r = analyze(_w(tmp_path / "run.log", "\n".join(lines) + "\n"))
    assert not r.healthy and r.verdict == "problems"
    (flat,) = [e for e in r.events if e.code == "plateau"]
    assert flat.metric == "train_loss" and flat.step == 1 and flat.evidence["from_start"]
    assert "ln(2)" in flat.message  # 0.6931: uniform guessing between two classes
    assert {s.name: s.last for s in r.series}["val_accuracy"] == 50.0


def test_a_printed_script_and_settings_are_not_metrics(tmp_path: Path) -> None:
    """modded-nanogpt prints its own source (holding `val_loss = 0.0`) before training; argparse
    Namespaces and config dumps hold settings. None of it may become a metric."""
    script = [
        "import os",
        "import torch",
        "def evaluate(model):",
        "    val_loss = 0.0",
        "    for _ in range(10):",
        "        val_loss += model()",
        "    return val_loss / 10",
        "lr = 0.008",
        "=" * 40,
    ]
    settings = [
        "Namespace(batch_size=64, lr=0.0003, val_loss=0.0, warmup=100)",
        "learning_rate: 0.0006",
        "weight_decay: 0.1",
        "val_loss: 0.0",
        "",
    ]
    records = [f"step:{i * 25}/500 val_loss:{4.0 - i * 0.1:.4f} train_time:{i * 900}ms" for i in range(0, 21)]
    r = analyze(_w(tmp_path / "record.txt", "\n".join(script + settings + records) + "\n"))
    val = {s.name: s for s in r.series}["val_loss"]
    assert val.points == 21 and val.min == pytest.approx(2.0) and val.first_step == 0
    assert "learning_rate" not in r.parse.roles and "batch_size" not in r.parse.roles
    assert r.parse.skipped[skip_reasons.SCRIPT] == len(script) - 1  # the separator ends it
    assert r.parse.skipped[skip_reasons.SETTINGS] == 1 and r.parse.skipped[skip_reasons.CONFIG] == 3
    assert not any(e.code == "overfitting" for e in r.events) and r.verdict == "healthy"


def test_bare_progress_bars_are_progress_not_metrics(tmp_path: Path) -> None:
    # the HF Trainer: the bar redraws (\r) up to just before a logging step, the dict is written
    # between frames, and the next line's first frame shows the step the dict belongs to
    def bars(k: int) -> str:
        return "".join(
            f"\r{n // 10:3d}%|#         | {n}/1000 [00:01<00:10, 9.95it/s]"
            for n in range(10 * k, 10 * k + 9, 4)
        )

    lines = [
        bars(k) + "\r" + f"{{'loss': {2.3 - k / 100:.2f}, 'learning_rate': 5e-05, 'epoch': 0.08}}"
        for k in range(12)
    ]
    r = analyze(_w(tmp_path / "hf.log", "\n".join([*lines, bars(12)]) + "\n"))
    assert set(r.parse.roles) == {"loss", "learning_rate", "epoch"}  # no it/s, no 1000
    loss = {s.name: s for s in r.series}["loss"]
    assert loss.points == 12 and (loss.first_step, loss.last_step) == (10, 120)
    assert r.parse.skipped[skip_reasons.PROGRESS] > 0


def test_gzip_logs_are_read_as_a_stream(tmp_path: Path) -> None:
    text = "".join(f"step {i} | loss {3 - i / 100:.4f}\n" for i in range(200))
    plain = analyze(_w(tmp_path / "a.log", text))
    gz = tmp_path / "a.log.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    zipped = analyze(gz)
    assert zipped.series == plain.series and zipped.verdict == "healthy"
    broken = tmp_path / "b.log.gz"
    broken.write_bytes(gzip.compress(text.encode())[:200])
    with pytest.raises(LogInputError, match="gzip stream is corrupt or truncated"):
        analyze(broken)


def test_a_log_growing_while_read_is_read_to_its_size_at_open(tmp_path: Path) -> None:
    from trainsleuth.tools.logs.source import LogFile

    p = _w(tmp_path / "live.log", "step 1 | loss 2.0\n")
    with LogFile(p) as f:
        with open(p, "a") as w:
            w.write("step 2 | loss 1.9\n" * 1000)
        assert f.read() == b"step 1 | loss 2.0\n"
        assert f.read() == b"" and f.truncated


def test_nan_is_data_in_summaries_and_extract(tmp_path: Path) -> None:
    text = "".join(f"step {i} | loss {3 - i / 100:.3f}\n" for i in range(100))
    text += "".join(f"step {i} | loss nan\n" for i in range(100, 200))
    p = _w(tmp_path / "nan.log", text)
    r = analyze(p)
    loss = {s.name: s for s in r.series}["loss"]
    assert loss.last == "nan" and loss.last_step == 199 and loss.nonfinite == 100
    assert loss.first_nonfinite_step == 100 and not r.healthy
    ex = extract(p, ["loss"], max_points=20)
    (s,) = ex.series
    assert "nan" in s.values and s.steps[s.values.index("nan")] == 100 and s.steps[-1] == 199
    assert len(s.values) <= 20 and s.nonfinite == 100


def test_plot_shades_nan_stretches(tmp_path: Path) -> None:
    from trainsleuth.tools.logs import collect
    from trainsleuth.tools.logs.plot import nonfinite_spans, render_png

    text = "".join(f"step {i} | loss {3 - i / 100:.3f}\n" for i in range(50)) + "step 50 | loss inf\n"
    text += "".join(f"step {i} | loss nan\n" for i in range(51, 60))
    collector, _, _ = collect(_w(tmp_path / "p.log", text))
    assert nonfinite_spans(collector.series["loss"]) == [(50.0, 59.0)]
    assert (render_png(collector, []) or b"").startswith(b"\x89PNG")


def test_loss_inferred_from_behaviour_and_roles_corrected(tmp_path: Path) -> None:
    lines = [f"it2={i} J={5.0 * 0.98**i:.4f} q={i % 7}" for i in range(60)]
    p = _w(tmp_path / "odd.log", "\n".join(lines) + "\n")
    r = analyze(p)
    assert r.parse.judged == ["J"] and r.parse.decided["J"].startswith("loss: inferred from behaviour")
    corrected = analyze(p, roles={"loss": "J", "step": "it2"})
    assert corrected.parse.user_roles == {"loss": "J", "step": "it2"}
    j = {s.name: s for s in corrected.series}["J"]
    assert j.first_step == 0 and j.last_step == 59 and "it2" not in corrected.parse.roles
    with pytest.raises(LogInputError, match="no metric 'j'") as info:
        analyze(p, roles=["loss=j"])
    assert info.value.next_step and "'J'" in info.value.next_step
    with pytest.raises(LogInputError, match="unknown role 'los'"):
        analyze(p, roles=["los=J"])


def test_no_loss_means_not_understood_not_healthy(tmp_path: Path) -> None:
    r = analyze(_w(tmp_path / "lr.log", "".join(f"step {i} lr={1e-3 * i:.5f}\n" for i in range(30))))
    assert r.verdict == "not_understood" and r.healthy is None and r.has_metrics
    assert "--role loss=" in r.notes[0]
    py = analyze(_w(tmp_path / "train.py", "import torch\nlr = 3e-4\ndef main():\n    loss = 0.0\n"))
    assert py.verdict == "not_understood" and py.healthy is None

"""Every supported log format parses into the right series, steps and roles."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from trainsleuth.tools.logs import analyze, collect, extract
from trainsleuth.tools.logs.roles import role_of

DATA = Path(__file__).parent / "data" / "logs"


def _series(path: Path, fmt: str = "auto") -> dict[str, tuple[list[float], list[float]]]:
    collector, _, _ = collect(path, fmt)
    out = {}
    for name, s in collector.series.items():
        steps, vals, _, _ = s.timeline()
        out[name] = (steps, vals)
    return out


def test_jsonl_nested_keys_are_flattened() -> None:
    s = _series(DATA / "metrics.jsonl")
    assert set(s) == {"train.loss", "train.grad_norm", "optim.lr"}
    steps, vals = s["train.loss"]
    assert steps[:3] == [5.0, 10.0, 15.0] and len(vals) == 40
    assert role_of("train.loss") == "loss" and role_of("train.grad_norm") == "grad_norm"


def test_lightning_csv_sparse_columns_interleaved_val_rows() -> None:
    report = analyze(DATA / "lightning_metrics.csv")
    assert report.format == "csv"
    s = _series(DATA / "lightning_metrics.csv")
    assert len(s["train_loss"][0]) == 60
    assert s["val_loss"][0] == [200.0, 400.0, 600.0]
    assert report.roles["val_loss"] == ["val_loss"] and report.roles["lr"] == ["lr-Adam"]
    assert report.healthy


def test_keras_csv_uses_epoch_as_step() -> None:
    s = _series(DATA / "keras_training.csv")
    assert s["loss"][0][:3] == [0.0, 1.0, 2.0]
    assert set(s) == {"accuracy", "loss", "val_accuracy", "val_loss"}
    assert analyze(DATA / "keras_training.csv").healthy


def test_tsv_is_detected(tmp_path: Path) -> None:
    p = tmp_path / "m.txt"
    p.write_text("step\tloss\tlr\n" + "".join(f"{i}\t{2 - i / 100:.3f}\t0.1\n" for i in range(30)))
    report = analyze(p)
    assert report.format == "tsv"
    assert _series(p)["loss"][0][-1] == 29.0


def test_hf_trainer_dict_lines_with_nan() -> None:
    report = analyze(DATA / "hf_trainer.log")
    s = _series(DATA / "hf_trainer.log")
    assert "loss" in s and "grad_norm" in s and "eval_loss" in s
    codes = {(e.code, e.metric, e.severity) for e in report.events}
    assert ("nonfinite_metric", "loss", "error") in codes
    nf = next(e for e in report.events if e.code == "nonfinite_metric" and e.metric == "loss")
    assert nf.evidence["step_source"] == "record position"


def test_trainer_state_json_log_history() -> None:
    report = analyze(DATA / "trainer_state.json")
    assert report.format == "trainer_state"
    s = _series(DATA / "trainer_state.json")
    assert s["loss"][0][:2] == [10.0, 20.0]
    assert s["eval_loss"][0] == [100.0, 200.0, 300.0, 400.0]
    assert report.healthy


def test_trainer_state_inside_checkpoint_folder(tmp_path: Path) -> None:
    ckpt = tmp_path / "checkpoint-400"
    ckpt.mkdir()
    shutil.copy(DATA / "trainer_state.json", ckpt / "trainer_state.json")
    (ckpt / "model.safetensors").write_bytes(b"\x00" * 64)
    report = analyze(tmp_path)
    assert report.format == "trainer_state" and "loss" in report.roles["loss"]


def test_fairseq_console_and_generic_pipe() -> None:
    s = _series(DATA / "fairseq.log")
    assert s["loss"][0][:2] == [100.0, 200.0]  # num_updates is the step
    assert {"gnorm", "lr", "wps", "loss_scale"} <= set(s)
    assert role_of("gnorm") == "grad_norm" and role_of("wps") == "throughput"
    p = _series(DATA / "pipe.log")
    assert p["loss"][0][:2] == [10.0, 20.0] and "grad_norm" in p and "lr" in p


def test_megatron_rank_prefix_and_wrapped_record() -> None:
    s = _series(DATA / "megatron_wrapped.log")
    steps, _ = s["lm loss"]
    assert steps == [float(i * 10) for i in range(1, 21)]  # record 70 is wrapped over three lines
    assert len(s["learning rate"][0]) == 20
    assert len(s["number of nan iterations"][0]) == 20
    assert role_of("lm loss") == "loss" and role_of("loss scale") == "loss_scale"


def test_megatron_validation_line(tmp_path: Path) -> None:
    p = tmp_path / "v.log"
    p.write_text(
        " validation loss at iteration 7000 | lm loss value: 7.174200E+00 | lm loss PPL: 1.305315E+03 |\n"
    )
    s = _series(p)
    assert s["validation lm loss value"] == ([7000.0], [7.1742])
    assert role_of("validation lm loss PPL") == "perplexity"


def test_nanogpt_iter_and_step_lines() -> None:
    s = _series(DATA / "nanogpt.log")
    assert s["loss"][0][:2] == [0.0, 10.0]
    assert s["val loss"][0] == [0.0, 100.0, 200.0, 300.0, 400.0]
    assert "time" in s and "mfu" in s
    assert role_of("val loss") == "val_loss" and role_of("mfu") == "throughput"


def test_tqdm_carriage_return_updates_with_postfix() -> None:
    s = _series(DATA / "tqdm.log")
    steps, vals = s["loss"]
    assert steps[:3] == [201.0, 202.0, 203.0] and len(vals) == 40  # `Epoch 1`: epoch x total + n
    assert "it/s" in s


def test_markdown_pasted_issue() -> None:
    report = analyze(DATA / "pasted_issue.md")
    s = _series(DATA / "pasted_issue.md")
    assert s["loss"][0][0] == 10.0
    kinds = {e.evidence.get("kind") for e in report.events if e.code == "error_message"}
    assert "cuda_oom" in kinds
    assert any(e.code == "nonfinite_metric" and e.step == 200 for e in report.events)


def test_tensorboard_log_dir(tmp_path: Path) -> None:
    from tensorboard.summary import Writer

    for run, scale in (("train", 1.0), ("eval", 1.1)):
        w = Writer(str(tmp_path / "tb" / run))
        for step in range(0, 200, 5):
            w.add_scalar("loss", scale * (2.0 + math.exp(-step / 50)), step)
            if run == "train":
                w.add_scalar("grad_norm", 1.0 + (step % 3) * 0.05, step)
        w.close()
    report = analyze(tmp_path / "tb")
    assert report.format == "tensorboard"
    s = _series(tmp_path / "tb")
    assert set(s) == {"train/loss", "train/grad_norm", "eval/loss"}
    assert s["train/loss"][0][:3] == [0.0, 5.0, 10.0]
    assert abs(s["train/loss"][1][0] - 3.0) < 1e-5
    assert report.roles["val_loss"] == ["eval/loss"]
    # a single event file works too
    one = next((tmp_path / "tb" / "train").glob("*tfevents*"))
    assert set(_series(one)) == {"loss", "grad_norm"}


def test_tensorboard_simple_value_events(tmp_path: Path) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    w = EventFileWriter(str(tmp_path))
    for step in range(10):
        summ = summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag="train/loss", simple_value=1.0 / (step + 1))]
        )
        w.add_event(event_pb2.Event(step=step, wall_time=1.0, summary=summ))
    w.close()
    s = _series(tmp_path)
    assert s["train/loss"][0] == [float(i) for i in range(10)]


def test_mlflow_run_folder(tmp_path: Path) -> None:
    run = tmp_path / "mlruns" / "0" / "abc123"
    (run / "metrics" / "train").mkdir(parents=True)
    (run / "meta.yaml").write_text("run_id: abc123\n")
    with open(run / "metrics" / "loss", "w") as f:
        for step in range(50):
            f.write(f"{1700000000000 + step} {2.0 + math.exp(-step / 10):.5f} {step * 10}\n")
    (run / "metrics" / "train" / "grad_norm").write_text(
        "".join(f"1 {1.0:.2f} {i * 10}\n" for i in range(50))
    )
    report = analyze(run)
    assert report.format == "mlflow"
    s = _series(run)
    assert s["loss"][0][:2] == [0.0, 10.0]
    assert "train/grad_norm" in s
    assert report.roles["loss"] == ["loss"]


def test_forced_format_and_unknown_format(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_text("".join(json.dumps({"step": i, "loss": 1.0 / (i + 1)}) + "\n" for i in range(10)))
    assert "loss" in _series(p, "jsonl")
    from trainsleuth.tools.logs import LogInputError

    with pytest.raises(LogInputError, match="unknown format"):
        analyze(p, "xml")


def test_restart_segments_replace_relogged_steps(tmp_path: Path) -> None:
    p = tmp_path / "restart.log"
    lines = [f"step {s} | loss {3 - s / 1000:.4f}" for s in range(0, 600, 10)]
    lines += [f"step {s} | loss {2.5 - s / 2000:.4f}" for s in range(400, 1000, 10)]  # resumed from 400
    p.write_text("\n".join(lines) + "\n")
    report = analyze(p)
    assert len(report.segments) == 2
    steps, vals = _series(p)["loss"]
    assert steps == sorted(steps) and len(steps) == len(set(steps)) == 100
    assert vals[steps.index(450.0)] == pytest.approx(2.5 - 450 / 2000)


def test_extract_downsamples_and_keeps_the_spike(tmp_path: Path) -> None:
    p = tmp_path / "long.jsonl"
    with open(p, "w") as f:
        for i in range(20000):
            loss = 9.0 if i == 12345 else 2.0 + 0.01 * math.sin(i)
            f.write(json.dumps({"step": i, "loss": loss, "lr": 1e-4}) + "\n")
    res = extract(p, ["loss"], max_points=100)
    (s,) = res.series
    assert len(s.values) <= 100 and s.points_in_log == 20000
    assert max(s.values) == 9.0 and s.steps[s.values.index(9.0)] == 12345
    ranged = extract(p, ["loss"], max_points=50, step_min=12000, step_max=13000).series[0]
    assert min(ranged.steps) >= 12000 and max(ranged.steps) <= 13000 and 9.0 in ranged.values
    by_role = extract(p, ["lr"], max_points=10)
    assert by_role.series[0].name == "lr"
    missing = extract(p, ["nope"], max_points=10)
    assert missing.missing == ["nope"] and "loss" in missing.available


def test_csv_nan_cells_are_values_and_empty_cells_are_not(tmp_path: Path) -> None:
    p = tmp_path / "m.csv"
    rows = ["step,loss,val_loss"] + [f"{i},{2 - i / 100:.3f}," for i in range(40)] + ["40,nan,1.5", "41,,1.4"]
    p.write_text("\n".join(rows) + "\n")
    report = analyze(p)
    s = _series(p)
    assert s["val_loss"] == ([40.0, 41.0], [1.5, 1.4])
    assert len(s["loss"][0]) == 40
    e = next(e for e in report.events if e.code == "nonfinite_metric")
    assert e.step == 40 and e.metric == "loss"


def test_csv_with_text_and_quoted_cells_falls_back_to_rows(tmp_path: Path) -> None:
    p = tmp_path / "m.csv"
    rows = ["step,loss,run,note"] + [f'{i},{2 - i / 100:.3f},baseline,"a, b"' for i in range(30)]
    p.write_text("\n".join(rows) + "\n")
    s = _series(p)
    assert set(s) == {"loss"}
    assert s["loss"][0] == [float(i) for i in range(30)]


def test_tqdm_bars_restarting_every_epoch_count_on(tmp_path: Path) -> None:
    p = tmp_path / "bars.log"
    frames = [
        f"Epoch {e}: {n}%|##| {n}/100 [00:01<00:01, 9.9it/s, loss={1 + (n % 20) / 100:.3f}]"
        for e in range(3)
        for n in range(10, 101, 10)
    ]
    p.write_text("\r".join(frames) + "\n")
    report = analyze(p)
    steps, _ = _series(p)["loss"]
    assert steps == sorted(steps) and len(steps) == 30 and steps[-1] == 300.0
    assert report.segments == []

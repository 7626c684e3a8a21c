"""compare_runs on the real-log corpus (tests/data/realworld_logs, material nobody on this project
wrote or that real training code produced): one run in two formats must read as identical; runs
that trained differently must diverge."""

from __future__ import annotations

from pathlib import Path

from trainsleuth.tools.compare.report import compare_runs, render_text

CORPUS = Path(__file__).resolve().parent / "data" / "realworld_logs"
MLFLOW_RUN = (
    CORPUS / "mlflow" / "lightning_digits_mlruns" / "193059333194602415" / "287f11ece3594fffb1ebbb7dd80b212e"
)


def test_hf_trainer_state_and_its_tensorboard_events_are_one_run() -> None:
    report = compare_runs(
        CORPUS / "hf_trainer" / "gpt2_tiny_trainer_state.json", CORPUS / "tensorboard"
    ).report
    assert report.verdict == "identical", render_text(report)  # float64 JSON vs float32 events
    assert {m.role for m in report.metrics} >= {"loss", "lr", "grad_norm", "val_loss"}


def test_keras_csvlogger_and_stdout_count_epochs_differently() -> None:
    report = compare_runs(
        CORPUS / "keras" / "healthy" / "training.log", CORPUS / "keras" / "healthy" / "stdout.log"
    ).report
    assert report.verdict == "identical", render_text(report)
    assert any("numbers its steps +1" in n for n in report.notes)


def test_lightning_csv_and_its_mlflow_run() -> None:
    report = compare_runs(CORPUS / "lightning" / "healthy" / "metrics.csv", MLFLOW_RUN).report
    assert report.verdict == "identical", render_text(report)
    assert any(n.startswith("commits: good unknown, run under test 931f6bd") for n in report.notes)


def test_a_crashed_run_is_said_to_stop_early() -> None:
    report = compare_runs(CORPUS / "lightning" / "healthy", CORPUS / "lightning" / "crash").report
    assert report.notes[0].startswith("the run under test stops at step"), report.notes
    assert any("read metrics.csv as the log of crash" in n for n in report.notes)


def test_keras_runs_with_a_wrong_learning_rate_diverge() -> None:
    good = CORPUS / "keras" / "healthy" / "training.log"
    for bad in ("lr_too_high", "tiny_lr"):
        report = compare_runs(good, CORPUS / "keras" / bad / "training.log").report
        assert report.verdict == "diverged", render_text(report)
        loss = next(m for m in report.metrics if m.metric == "loss")
        assert loss.status == "diverged" and loss.direction == "higher"

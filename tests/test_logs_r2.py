"""A regressor whose R^2 never leaves 0 (the agent benchmark's house_regression case: the loss falls a
little and settles while the model predicts one constant). The logs are the case's own output, broken and
fixed (`python train.py --epochs 20` on the built case, before and after fix.patch)."""

from __future__ import annotations

from pathlib import Path

from trainsleuth.tools.logs import analyze

DATA = Path(__file__).resolve().parent / "data" / "agent_logs"


def test_keys_with_digits_are_read_in_space_separated_lines(tmp_path: Path) -> None:
    log = tmp_path / "k.log"
    log.write_text(
        "".join(
            f"epoch  {i}  loss 0.{9 - i}  train_r2 0.0{i}  val_f1 0.{i}  top5_acc 0.{i + 2}\n"
            for i in range(1, 7)
        )
    )
    report = analyze(log)
    names = {s.name for s in report.series}
    assert {"train_r2", "val_f1", "top5_acc", "loss"} <= names


def test_r2_stuck_at_the_mean_predictor_is_flagged() -> None:
    report = analyze(DATA / "house_regression_broken.log")
    [f] = [e for e in report.events if e.code == "plateau"]
    assert f.metric == "train_r2" and f.severity == "warning"
    assert "predicting the mean" in f.message
    assert report.verdict != "healthy"


def test_r2_of_a_learning_regressor_is_quiet() -> None:
    report = analyze(DATA / "house_regression_fixed.log")
    assert not [e for e in report.events if e.code == "plateau"], [e.message for e in report.events]
    assert report.verdict == "healthy"


def test_a_loss_too_short_to_show_a_trend_is_not_called_healthy(tmp_path: Path) -> None:
    """Two epochs at ln(2) (a 2-epoch run of the tabular case): no rule can judge a trend, so no verdict."""
    log = tmp_path / "two.log"
    log.write_text(
        "epoch 1 | train_loss 0.6931 | val_loss 0.6935 | val_acc 50.1 %\n"
        "epoch 2 | train_loss 0.6930 | val_loss 0.6934 | val_acc 49.8 %\n"
    )
    report = analyze(log)
    assert report.verdict == "not_understood" and report.healthy is None
    assert report.parse.judged == ["train_loss"] and "Too short to judge" in report.notes[0]
    # a short loss that more than halves did learn: judged as usual
    log.write_text("epoch 1 | train_loss 2.3 | val_loss 2.2\nepoch 2 | train_loss 0.9 | val_loss 1.0\n")
    assert analyze(log).verdict == "healthy"

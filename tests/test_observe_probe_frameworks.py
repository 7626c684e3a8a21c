"""The observer's probe through training frameworks: a Hugging Face Trainer with its own compute_loss
(with and without gradient accumulation) and a Lightning Trainer, each from the user's own command
(`tests/data/observe/frameworks`): the bug found, the healthy twin quiet. Tiny configs, no downloads."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from trainsleuth.tools.probe.observed import probe_command
from trainsleuth.tools.probe.report import ProbeReport

FRAMEWORKS = Path(__file__).resolve().parent / "data" / "observe" / "frameworks"

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def project(git_project: Callable[[Path], Path]) -> Path:
    return git_project(FRAMEWORKS)


def probe(ws: Path, command: str, steps: int = 3) -> ProbeReport:
    return probe_command(command, python=Path(sys.executable), workspace=ws, steps=steps, timeout_s=600)


def alarms(report: ProbeReport) -> list[tuple[str, str | None]]:
    return [(f.code, f.module) for f in report.findings if f.severity != "info"]


def test_hf_trainer_compute_loss_broadcast_and_its_twin(project: Path) -> None:
    broken = probe(project, "python hf_regression_train.py --output_dir out")
    [f] = broken.findings
    assert (f.code, f.module) == ("loss_broadcast", "classifier")
    assert "compute_loss" in f.evidence["where"]
    assert broken.models[0]["type"] == "BertForSequenceClassification"
    assert any(r["name"].startswith("bert.encoder.layer.0.") for r in broken.params) or broken.n_params
    healthy = probe(project, "python hf_regression_train.py --output_dir out --squeeze --accum 2")
    assert healthy.healthy, alarms(healthy)
    assert not (project / "out").exists()  # the Trainer's output folder was made in the scratch copy


def test_lightning_head_missing_from_configure_optimizers_and_its_twin(project: Path) -> None:
    pytest.importorskip("lightning")
    broken = probe(project, "python lightning_train.py --encoder-only-optimizer")
    assert alarms(broken) == [("params_not_updated", "head")]
    rows = {r["name"]: r for r in broken.params}
    assert rows["head.weight"]["in_optimizer"] is False and rows["encoder.0.weight"]["in_optimizer"] is True
    healthy = probe(project, "python lightning_train.py")
    assert healthy.healthy, alarms(healthy)

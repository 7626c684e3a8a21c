"""The probe on real architectures: every healthy setup clean, every broken one found and localised.

Setups live in `tests/realarch/` (Hugging Face transformers from small configs, standard torch
training loops, the optimizers and schedules their docs recommend). The probe's own driver and rules
run in this process on each entrypoint (the subprocess path is exercised by the CLI tests at the end).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from trainsleuth.tools.runners import _ts_entrypoint, _ts_probe_core, _ts_probe_rules, probe_runner

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "tests" / "realarch"
HEALTHY_FILE = SUITE / "realarch_healthy.py"
BROKEN_FILE = SUITE / "realarch_broken.py"

pytest.importorskip("transformers")


def _names(path: Path, attr: str) -> list[Any]:
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_suite_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(getattr(module, attr))


HEALTHY = [f.__name__ for f in _names(HEALTHY_FILE, "HEALTHY")]
BROKEN = [(f.__name__, code, module) for f, code, module in _names(BROKEN_FILE, "BROKEN")]
_CACHE: dict[tuple[str, int], tuple[dict[str, Any], list[dict[str, Any]], list[str]]] = {}


@pytest.fixture(autouse=True, scope="module")
def one_thread():  # type: ignore[no-untyped-def]
    """Tiny models run fastest on one thread, and the suite shares 2 cores with other test files."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def run(path: Path, fn: str, steps: int = 8) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    key = (f"{path.name}:{fn}", steps)
    if key not in _CACHE:
        contract = _ts_entrypoint.load_contract(f"{path}:{fn}")
        stats = probe_runner.drive(contract, steps, _ts_probe_core, torch)
        notes = list(stats.get("notes", []))
        _CACHE[key] = (stats, _ts_probe_rules.analyze(stats, notes), notes)
    return _CACHE[key]


def alarms(findings: list[dict[str, Any]]) -> list[tuple[str, Any, str]]:
    return [(f["code"], f["module"], f["message"]) for f in findings if f["severity"] != "info"]


def test_suite_sizes() -> None:
    assert len(HEALTHY) >= 20
    assert len(BROKEN) >= 15


@pytest.mark.parametrize("fn", HEALTHY)
def test_healthy_setup_is_clean(fn: str) -> None:
    stats, findings, _ = run(HEALTHY_FILE, fn)
    assert stats["internal_errors"] == []
    assert alarms(findings) == [], fn
    assert stats["steps"] == 8


@pytest.mark.parametrize(("fn", "code", "module"), BROKEN)
def test_broken_setup_is_found_and_localised(fn: str, code: str, module: str | None) -> None:
    stats, findings, _ = run(BROKEN_FILE, fn)
    hits = [f for f in findings if f["code"] == code and f["severity"] in ("warning", "error")]
    assert hits, f"{fn}: expected {code}, got {alarms(findings)}"
    if module is not None:
        assert hits[0]["module"] == module, hits[0]
    assert stats["internal_errors"] == []


def test_every_loss_contract_and_accumulation_check_has_a_real_bug() -> None:
    codes = {code for _, code, _ in BROKEN}
    assert {
        "labels_all_ignored",
        "loss_input_mismatch",
        "label_out_of_range",
        "initial_loss_off",
        "train_mode_off",
        "dropout_in_eval",
        "grad_accumulation_mismatch",
        "grad_not_zeroed",
        "loss_broadcast",
        "loss_wrong_axis",
    } <= codes
    accum = [fn for fn, code, _ in BROKEN if code == "grad_accumulation_mismatch"]
    assert len(accum) >= 2  # a loss not divided by k, and zero_grad inside the loop


def test_loss_broadcast_names_operation_and_shapes() -> None:
    _, findings, _ = run(BROKEN_FILE, "distilbert_regression_broadcast")
    (f,) = [f for f in findings if f["code"] == "loss_broadcast"]
    ev = f["evidence"]
    assert (ev["operation"], ev["prediction_shape"], ev["target_shape"], ev["result_shape"]) == (
        "sub",
        [8, 1],
        [8],
        [8, 8],
    )
    assert "classifier.weight" in ev["params"]


def test_out_of_range_labels_stop_before_the_loss_kernel() -> None:
    stats, findings, _ = run(BROKEN_FILE, "bert_labels_numbered_from_one")
    (f,) = [f for f in findings if f["code"] == "label_out_of_range"]
    assert (f["evidence"]["min_label"], f["evidence"]["max_label"], f["evidence"]["num_classes"]) == (1, 3, 3)
    assert stats["steps"] == 0 and "stopped before the loss ran" in stats["stopped"]


def test_accumulation_evidence_against_the_large_batch() -> None:
    stats, _, _ = run(BROKEN_FILE, "llama_accumulation_loss_not_divided")
    acc = stats["accumulation"]
    assert acc["micro_batches"] == 4
    assert abs(acc["norm_ratio"] - 4) < 0.2 and acc["cosine"] > 0.99
    stats, _, _ = run(HEALTHY_FILE, "gpt2_grad_accumulation")
    acc = stats["accumulation"]
    assert acc["micro_batches"] == 4 and abs(acc["norm_ratio"] - 1) < 0.05 and acc["cosine"] > 0.99


def test_params_not_updated_names_the_head_parameters() -> None:
    _, findings, _ = run(BROKEN_FILE, "vit_head_replaced_after_optimizer")
    (f,) = [f for f in findings if f["code"] == "params_not_updated"]
    assert "classifier.weight" in f["message"] and "top-level" not in f["message"]
    assert f["evidence"]["params"] == ["classifier.weight", "classifier.bias"]


@pytest.mark.parametrize("steps", [2, 4])
def test_learning_rate_too_high_does_not_depend_on_steps(steps: int) -> None:
    _, findings, _ = run(BROKEN_FILE, "bert_learning_rate_100x", steps)
    assert any(f["code"] == "update_ratio_high" for f in findings), alarms(findings)
    _, findings, _ = run(HEALTHY_FILE, "bert_sequence_classification", steps)
    assert alarms(findings) == []


def _cli(entry: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "trainsleuth", "probe", entry, "--json", "--steps", "4"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


def test_cli_subprocess_reports_a_broken_real_model() -> None:
    out = _cli("tests/realarch/realarch_broken.py:gpt2_accumulation_zero_grad_inside_loop")
    assert out["ok"] is True and out["healthy"] is False
    codes = {f["code"] for f in out["findings"]}
    assert "grad_accumulation_mismatch" in codes

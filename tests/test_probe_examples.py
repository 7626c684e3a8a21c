"""Every broken example yields its code (right module for origins and paths); every healthy control is clean.

The probe's own driver and rules run in this process on the real examples (the subprocess path is
covered by tests/test_probe_tool.py and tests/test_probe_cli.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from trainsleuth.tools.runners import _ts_entrypoint, _ts_probe_core, _ts_probe_rules, probe_runner

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "probe"

BROKEN: list[tuple[str, str, str | None]] = [
    ("broken_nan_log.py:broken", "nonfinite_forward", "encoder.logscale"),
    ("broken_nan_log.py:broken", "nonfinite_loss", None),
    ("broken_nan_parent.py:broken", "nonfinite_forward", "block"),
    ("broken_nan_grad.py:broken", "nonfinite_gradient", "radius"),
    ("broken_loss_zero_division.py:broken", "nonfinite_loss", None),
    ("broken_exploding.py:broken", "exploding_gradients", None),
    ("broken_vanishing.py:broken", "vanishing_gradients", "layers.0"),
    ("broken_dead_relu.py:broken", "dead_relu", "hidden.1"),
    ("broken_saturated.py:broken", "saturated_activations", "hidden.1"),
    ("broken_detached.py:broken", "no_gradient", "encoder"),
    ("broken_not_in_optimizer.py:broken", "params_not_updated", "backbone"),
    ("broken_lr_high.py:broken", "update_ratio_high", None),
    ("broken_lr_low.py:broken", "update_ratio_low", None),
    ("broken_gain_units.py:broken", "gradient_imbalance", "gain"),
    ("broken_loss_weighting.py:broken", "loss_component_imbalance", None),
    ("broken_no_zero_grad.py:broken", "grad_not_zeroed", None),
    ("broken_stuck.py:broken", "loss_not_decreasing", None),
    ("broken_diverging.py:broken", "loss_diverging", None),
    ("broken_raw_pixels.py:broken", "input_not_normalized", None),
]

HEALTHY = [
    "healthy_cnn_bn.py:make",
    "healthy_transformer.py:make",
    "healthy_lstm.py:make",
    "healthy_finetune_frozen.py:make",
    "healthy_hf_style.py:make",
    "healthy_step_fn_clip.py:make",
    "healthy_multitask.py:make",
    "broken_nan_log.py:fixed",
]

_CACHE: dict[str, list[dict[str, Any]]] = {}


def probe(spec: str, steps: int = 8) -> list[dict[str, Any]]:
    if spec not in _CACHE:
        contract = _ts_entrypoint.load_contract(str(EXAMPLES / spec.split(":")[0]) + ":" + spec.split(":")[1])
        stats = probe_runner.drive(contract, steps, _ts_probe_core, torch)
        _CACHE[spec] = _ts_probe_rules.analyze(stats)
    return _CACHE[spec]


@pytest.mark.parametrize(("spec", "code", "module"), BROKEN)
def test_broken_example_yields_its_code(spec: str, code: str, module: str | None) -> None:
    findings = probe(spec)
    hits = [f for f in findings if f["code"] == code]
    assert hits, f"{spec}: expected {code}, got {[(f['code'], f['module']) for f in findings]}"
    assert all(f["severity"] in ("warning", "error") for f in hits)
    if module is not None:
        assert hits[0]["module"] == module


@pytest.mark.parametrize("spec", HEALTHY)
def test_healthy_control_has_no_warning_or_error(spec: str) -> None:
    findings = probe(spec)
    bad = [(f["code"], f["module"], f["message"]) for f in findings if f["severity"] != "info"]
    assert bad == [], f"{spec}: false alarms {bad}"


def test_parent_code_origin_names_the_children() -> None:
    (f,) = [f for f in probe("broken_nan_parent.py:broken") if f["code"] == "nonfinite_forward"]
    assert f["evidence"]["kind"] == "parent_code"
    assert f["evidence"]["last_finite_child"] == "block.act"
    assert f["evidence"]["first_nonfinite_input_child"] == "block.out"


def test_nonfinite_loss_from_loss_function_says_so() -> None:
    (f,) = [f for f in probe("broken_loss_zero_division.py:broken") if f["code"] == "nonfinite_loss"]
    assert "loss function" in f["evidence"]["created_in"]
    assert not any(x["code"] == "nonfinite_forward" for x in probe("broken_loss_zero_division.py:broken"))


def test_frozen_parameters_are_never_reported_as_no_gradient() -> None:
    assert not any(f["code"] == "no_gradient" for f in probe("healthy_finetune_frozen.py:make"))


def test_every_probe_code_is_covered_by_an_example() -> None:
    covered = {code for _, code, _ in BROKEN}
    from trainsleuth.tools.findings import PROBE_CODES

    assert covered == set(PROBE_CODES) - {"precision_mismatch", "rank_divergence", "collective_mismatch"}


def test_unused_embedding_rows_are_not_no_gradient() -> None:
    model = torch.nn.Sequential(torch.nn.Embedding(1000, 8), torch.nn.Flatten(), torch.nn.Linear(32, 2))
    ids = torch.randint(0, 10, (4, 4))  # most rows unused by this batch
    contract = {
        "model": model,
        "batches": [(ids, torch.randint(0, 2, (4,)))],
        "loss_fn": lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.1),
    }
    findings = _ts_probe_rules.analyze(probe_runner.drive(contract, 3, _ts_probe_core, torch))
    assert not any(f["code"] in ("no_gradient", "params_not_updated") for f in findings)


def test_unused_branch_is_no_gradient_and_says_never_called() -> None:
    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.used = torch.nn.Linear(4, 2)
            self.aux_head = torch.nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.used(x)

    model = Model()
    contract = {
        "model": model,
        "batches": [(torch.randn(8, 4), torch.randint(0, 2, (8,)))],
        "loss_fn": lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1]),
    }
    findings = _ts_probe_rules.analyze(probe_runner.drive(contract, 2, _ts_probe_core, torch))
    (f,) = [f for f in findings if f["code"] == "no_gradient"]
    assert f["module"] == "aux_head" and f["evidence"]["module_called"] is False


def test_inplace_activation_and_tuple_outputs_are_handled() -> None:
    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 8)
            self.act = torch.nn.ReLU(inplace=True)
            self.gru = torch.nn.GRU(8, 8, batch_first=True)
            self.head = torch.nn.Linear(8, 1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.act(self.lin(x))
            out, last = self.gru(h)
            return self.head(out[:, -1]), last

    model = Model()
    contract = {
        "model": model,
        "batches": [torch.randn(8, 5, 4)],
        "loss_fn": lambda m, b: m(b)[0].pow(2).mean(),
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }
    stats = probe_runner.drive(contract, 4, _ts_probe_core, torch)
    assert stats["internal_errors"] == []
    assert [f for f in _ts_probe_rules.analyze(stats) if f["severity"] != "info"] == []


def test_bf16_autocast_model_is_probed_without_false_alarms() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))

    def loss_fn(m: torch.nn.Module, b: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = m(b[0])
        return torch.nn.functional.cross_entropy(logits.float(), b[1])

    contract = {
        "model": model,
        "batches": [(torch.randn(64, 16), torch.randint(0, 4, (64,)))],
        "loss_fn": loss_fn,
        "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
    }
    stats = probe_runner.drive(contract, 6, _ts_probe_core, torch)
    assert stats["internal_errors"] == []
    assert [f for f in _ts_probe_rules.analyze(stats) if f["severity"] != "info"] == []
    assert all(isinstance(x, float) for x in stats["losses"])

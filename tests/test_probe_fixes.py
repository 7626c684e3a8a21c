"""Per-parameter `params_not_updated` and the module named for a NaN gradient made in the loss code.

The probe's driver and rules run in this process on real models (examples/probe/ and the labelled
fault cases); the subprocess/CLI path is covered by tests/test_probe_cli.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from trainsleuth.tools.runners import _ts_entrypoint, _ts_probe_core, _ts_probe_rules, probe_runner

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "probe"
CASES = ROOT / "benchmarks" / "faults" / "cases" / "probe"


def probe(path: Path, fn: str, steps: int = 8) -> list[dict[str, Any]]:
    contract = _ts_entrypoint.load_contract(f"{path}:{fn}")
    stats = probe_runner.drive(contract, steps, _ts_probe_core, torch)
    return _ts_probe_rules.analyze(stats)


def alarms(findings: list[dict[str, Any]]) -> list[tuple[str, Any, str]]:
    return [(f["code"], f["module"], f["message"]) for f in findings if f["severity"] != "info"]


def test_norm_weight_missing_from_groups_is_reported_per_parameter() -> None:
    findings = probe(EXAMPLES / "broken_norms_not_in_groups.py", "broken")
    hits = [f for f in findings if f["code"] == "params_not_updated"]
    assert [f["module"] for f in hits] == ["block.norm"], alarms(findings)
    ev = hits[0]["evidence"]
    assert ev["params"] == ["block.norm.weight"]
    assert ev["updated_params"] == ["block.norm.bias"]
    assert ev["in_optimizer"] is False
    assert "norm.weight" in hits[0]["message"] or "weight" in hits[0]["message"]


def test_norm_weights_in_groups_is_clean() -> None:
    assert alarms(probe(EXAMPLES / "broken_norms_not_in_groups.py", "fixed")) == []


def test_fault_case_transformer_norms_missing_from_groups() -> None:
    findings = probe(CASES / "not_updated_norms_missing_from_groups.py", "setup")
    hits = [f for f in findings if f["code"] == "params_not_updated"]
    assert sorted(f["module"] for f in hits) == [
        f"encoder.layers.{i}.norm{j}" for i in (0, 1) for j in (1, 2)
    ], alarms(findings)
    for f in hits:
        assert f["evidence"]["params"] == [f["module"] + ".weight"]
        assert f["evidence"]["in_optimizer"] is False


def test_nan_gradient_from_loss_names_first_module_in_backward_order() -> None:
    findings = probe(EXAMPLES / "broken_nan_grad_in_loss.py", "broken")
    hits = [f for f in findings if f["code"] == "nonfinite_gradient"]
    assert len(hits) == 1, alarms(findings)
    assert hits[0]["module"] == "2"
    assert hits[0]["evidence"]["kind"] == "loss"
    assert hits[0]["evidence"]["entered_from"] == "loss function"
    assert hits[0]["evidence"]["type"] == "Linear"
    assert "loss function" in hits[0]["message"]


def test_nan_gradient_from_loss_fixed_is_clean() -> None:
    assert alarms(probe(EXAMPLES / "broken_nan_grad_in_loss.py", "fixed")) == []


def test_fault_case_pairwise_distance_module() -> None:
    findings = probe(CASES / "nan_grad_pairwise_distance.py", "setup")
    hits = [f for f in findings if f["code"] == "nonfinite_gradient"]
    assert [f["module"] for f in hits] == ["4"]
    assert hits[0]["evidence"]["kind"] == "loss"


@pytest.mark.parametrize(
    ("fn", "steps"),
    [
        ("decay_groups", 8),
        ("decay_groups", 1),
        ("sparse_embedding", 8),
        ("warmup_tiny_lr", 8),
        ("sgd_momentum", 8),
        ("sgd_momentum", 1),
        ("step_fn_sched", 8),
    ],
)
def test_healthy_param_group_controls_are_clean(fn: str, steps: int) -> None:
    assert alarms(probe(EXAMPLES / "healthy_param_groups.py", fn, steps)) == []


def _stats(params: list[dict[str, Any]]) -> dict[str, Any]:
    pbm: dict[str, list[str]] = {"": [p["name"] for p in params]}
    for p in params:
        pbm.setdefault(p["module"], []).append(p["name"])
    base = {"requires_grad": True, "numel": 16, "ndim": 1, "none_steps": 0, "zero_steps": 0}
    return {
        "steps": 3,
        "valid_steps": 3,
        "losses": [1.0, 0.9, 0.8],
        "updates_measured": True,
        "params": [{**base, **p} for p in params],
        "params_by_module": pbm,
        "modules": [{"name": "", "type": "Net"}, {"name": "norm", "type": "LayerNorm"}],
    }


def _p(name: str, changed: list[int], grads: list[float], **kw: Any) -> dict[str, Any]:
    return {
        "name": name,
        "module": name.rpartition(".")[0],
        "changed_steps": changed,
        "grad_norms": grads,
        **kw,
    }


def test_rule_lr_zero_parameter_beside_a_moving_one() -> None:
    stats = _stats(
        [
            _p("norm.weight", [], [1.0, 1.0, 1.0], in_optimizer=True, lr=0.0),
            _p("norm.bias", [0, 1, 2], [1.0, 1.0, 1.0], in_optimizer=True, lr=0.1),
        ]
    )
    hits = [f for f in _ts_probe_rules.analyze(stats) if f["code"] == "params_not_updated"]
    assert [(f["module"], f["evidence"]["params"], f["evidence"]["learning_rates"]) for f in hits] == [
        ("norm", ["norm.weight"], [0.0])
    ]
    assert "learning rate is 0" in hits[0]["message"]


def test_rule_zero_gradient_or_unexplained_partial_is_not_reported() -> None:
    # a parameter missing from the optimizer whose gradient is exactly zero (a dead path, reported
    # elsewhere), and one in the optimizer with lr > 0 that did not move while its sibling did (a tiny
    # update below float precision): neither is params_not_updated
    stats = _stats(
        [
            _p("norm.weight", [], [0.0, 0.0, 0.0], in_optimizer=False, lr=None, zero_steps=3),
            _p("norm.bias", [0, 1, 2], [1.0, 1.0, 1.0], in_optimizer=True, lr=0.1),
            _p("norm.gain", [], [1.0, 1.0, 1.0], in_optimizer=True, lr=1e-9),
        ]
    )
    assert [f for f in _ts_probe_rules.analyze(stats) if f["code"] == "params_not_updated"] == []

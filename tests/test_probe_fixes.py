"""Per-parameter `params_not_updated` and the module named for a NaN gradient made in the loss code.

The probe's driver and rules run in this process on real models (examples/probe/ and the labelled
fault cases); the subprocess/CLI path is covered by tests/test_probe_cli.py.
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


# ---------------------------------------------------------------------------------------- issue 17.5


class _TwoInputModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = torch.nn.Linear(6, 16)
        self.act = torch.nn.ReLU()
        self.head = torch.nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.act(self.enc(x)))


def test_step_fn_with_several_tuple_batches_does_not_crash() -> None:
    torch.manual_seed(0)
    model = _TwoInputModel()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step_fn(m: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    batches = [(torch.randn(32, 6), torch.randint(0, 3, (32,))) for _ in range(3)]
    stats = probe_runner.drive(
        {"model": model, "batches": batches, "optimizer": opt, "step_fn": step_fn}, 4, _ts_probe_core, torch
    )
    assert stats["steps"] == 4 and stats["internal_errors"] == []
    # the other batches got forward-only passes, calling the model the way step_fn did: model(x)
    relu = next(m for m in stats["modules"] if m["name"] == "act")
    assert relu["act_obs"] == 32 * 4 + 32 * 2
    assert not any("forward-only" in n for n in stats["notes"])


def test_nonfinite_params_are_measured_during_the_forward_pass_and_the_moment_named() -> None:
    torch.manual_seed(0)
    model = _TwoInputModel()
    with torch.no_grad():
        model.enc.weight[0, 0] = float("nan")  # a checkpoint that already holds a NaN weight
    contract = {
        "model": model,
        "batches": [(torch.randn(8, 6), torch.randint(0, 3, (8,)))],
        "loss_fn": lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1]),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.1),
    }
    stats = probe_runner.drive(contract, 3, _ts_probe_core, torch)
    (f,) = [f for f in _ts_probe_rules.analyze(stats) if f["code"] == "nonfinite_forward"]
    assert f["module"] == "enc"
    assert f["evidence"]["nonfinite_params_before_step"] == ["enc.weight"]
    assert "before its optimizer step" in f["evidence"]["nonfinite_params_before_step_measured"]
    assert "already non-finite during that forward pass" in f["message"]
    assert "stopped after probe step 0" in stats["stopped"]


def test_text_output_carries_what_the_json_says() -> None:
    from trainsleuth.tools.probe.report import ProbeReport, render_report, to_findings

    stats = probe(EXAMPLES / "broken_loss_zero_division.py", "broken")
    contract = _ts_entrypoint.load_contract(f"{EXAMPLES / 'broken_loss_zero_division.py'}:broken")
    raw = probe_runner.drive(contract, 8, _ts_probe_core, torch)
    notes = list(raw["notes"])
    findings = to_findings(_ts_probe_rules.analyze(raw, notes))
    report = ProbeReport(
        entrypoint="x.py:broken",
        interpreter=sys.executable,
        steps=raw["steps"],
        mode=raw["mode"],
        findings=findings,
        losses=raw["losses"],
        requested_steps=8,
        stopped=raw["stopped"],
        notes=notes,
    )
    text = render_report(report)
    assert stats and "of 8 step(s)" in text and "Stopped early: stopped after probe step" in text
    assert "created in: loss function" in text
    assert "failure modes:" in text
    assert "Note: In loss_fn mode" in text
    from trainsleuth.tools.probe.report import finding_lines

    stale = to_findings(probe(EXAMPLES / "broken_no_zero_grad.py", "broken"))
    block = "\n".join(line for f in stale for line in finding_lines(f))
    assert "fix: call optimizer.zero_grad()" in block


def test_cli_json_error_carries_the_full_traceback(tmp_path: Path) -> None:
    (tmp_path / "entry.py").write_text(
        "import torch\n"
        "def loss(m, b):\n"
        "    raise RuntimeError('shape mismatch in my_loss_helper')\n"
        "def make():\n"
        "    return {'model': torch.nn.Linear(2, 1), 'batch': torch.randn(4, 2), 'loss_fn': loss}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "trainsleuth", "probe", "entry.py:make", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    err = json.loads(proc.stdout)["error"]
    assert err["kind"] == "step_raised"
    assert 'entry.py", line 3, in loss' in err["traceback"] and "my_loss_helper" in err["traceback"]

"""probe_gradients on the user's own command: real projects in git repositories, real subprocesses, real torch.

The forecaster (`tests/data/observe/forecaster`) is a config-driven project whose `Trainer(cfg).fit()`
computes the loss inside the class; its config pattern `attn.proj` (matched by substring) zeroes
attn.proj_qkv as well as attn.proj_out, so neither ever gets a gradient. Its healthy twin zeroes only
the output projection. The plain loops in `tests/data/observe/loops` each carry one bug behind a flag.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from mcp import Client

import trainsleuth.probe
from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.tools.probe.observed import probe_command
from trainsleuth.tools.probe.report import ProbeError, ProbeReport, render_report

DATA = Path(__file__).resolve().parent / "data" / "observe"
PY = Path(sys.executable)


@pytest.fixture(scope="module")
def forecaster(git_project: Callable[[Path], Path]) -> Path:
    return git_project(DATA / "forecaster")


@pytest.fixture(scope="module")
def loops(git_project: Callable[[Path], Path]) -> Path:
    return git_project(DATA / "loops")


def probe(ws: Path, command: str, steps: int = 4, **kw: Any) -> ProbeReport:
    return probe_command(command, python=PY, workspace=ws, steps=steps, timeout_s=600, **kw)


def alarms(report: ProbeReport) -> list[tuple[str, str | None]]:
    return [(f.code, f.module) for f in report.findings if f.severity != "info"]


def test_dead_attention_pair_is_named_as_a_pair_with_everything_a_script_would_print(
    forecaster: Path,
) -> None:
    before = sorted(p.name for p in forecaster.iterdir() if p.name != ".trainsleuth")
    report = probe(forecaster, "python train.py --config configs/base.json")
    assert report.mode == "observed" and report.fixed_batch is False
    assert report.observed_steps == [1, 2, 3, 4] and report.stopped is None
    [dead] = report.findings
    assert (dead.code, dead.severity, dead.module) == ("no_gradient", "error", "blocks.0.attn")
    assert dead.evidence["zero_factors"] == ["proj_qkv", "proj_out"] and dead.evidence["n_modules"] == 2
    assert "blocks.*.attn" in dead.message and "proj_qkv and proj_out are all-zero" in dead.message
    assert "a product of zeros never moves" in dead.message
    assert "blocks.*.norm1" in dead.message  # the norms that only feed the dead attention, named with it
    assert dead.failure_modes == ["bad-initialisation"]
    # per parameter: gradient per observed step (read at the optimizer step), optimizer, update
    rows = {r["name"]: r for r in report.params}
    qkv = rows["blocks.0.attn.proj_qkv.weight"]
    assert qkv["gradient"] == "exactly zero" and qkv["grad_norms"] == [0.0] * 4
    assert qkv["in_optimizer"] is True and qkv["requires_grad"] is True and qkv["changed_steps"] == 0
    assert "blocks.0.mlp.fc2.weight" not in rows or rows["blocks.0.mlp.fc2.weight"]["gradient"] == "ok"
    # loss and lr per step, models, the per-module table with activation scale
    assert len(report.losses) == 4 and all(isinstance(x, float) for x in report.losses)
    assert report.lrs[0] == {"0": [0.001]}
    assert report.models == [
        {
            "label": "model",
            "type": "Forecaster",
            "wrappers": [],
            "compiled": False,
            "params": 19624,
            "trainable": 19624,
            "tensors": 31,
        }
    ]
    table = {row["module"]: row for row in report.table}
    assert table["blocks.0.attn.proj_qkv"]["act_rms"] == [0.0, 0.0]
    assert table["embed"]["act_rms"][0] > 0.1
    text = render_report(report)
    assert "optimizer steps 1..4 of the real run" in text and "exactly zero" in text
    # the run's outputs stayed in its scratch copy
    assert sorted(p.name for p in forecaster.iterdir() if p.name != ".trainsleuth") == before
    assert not any("changed during the run" in n for n in report.notes)


def test_healthy_twin_zeroing_only_the_output_projection_is_quiet(forecaster: Path) -> None:
    report = probe(forecaster, "python train.py --config configs/fixed.json")
    assert alarms(report) == [] and report.healthy
    rows = {r["name"]: r for r in report.params}
    assert all(r["gradient"] == "ok" for r in rows.values())


def test_one_step_judges_the_pair_and_excuses_the_twin_with_a_note(forecaster: Path) -> None:
    broken = probe(forecaster, "python train.py --config configs/base.json", steps=1)
    assert ("no_gradient", "blocks.0.attn") in alarms(broken)
    fixed = probe(forecaster, "python train.py --config configs/fixed.json", steps=1)
    assert fixed.healthy
    assert any("until their first update" in n and "proj_qkv" in n for n in fixed.notes)


def test_live_mode_judges_the_same_pair(tmp_path: Path) -> None:
    """One set of rules: live mode (attach in the user's loop) names the same dead pair."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "realarch"))
    try:
        from realarch_broken import zero_init_attention_pair
        from realarch_healthy import zero_residual_projections
    finally:
        sys.path.pop(0)
    for make, dead in ((zero_init_attention_pair, True), (zero_residual_projections, False)):
        setup = make()
        model, opt, (ids, y) = setup["model"], setup["optimizer"], setup["batch"]
        with trainsleuth.probe.attach(model, opt, every=1, run_dir=tmp_path / make.__name__) as handle:
            for _ in range(4):
                loss = torch.nn.functional.cross_entropy(model(ids), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                handle.record_loss(loss)
            found = [(f["code"], f["module"]) for f in handle.findings() if f["severity"] != "info"]
        assert found == ([("no_gradient", "blocks.0.attn")] if dead else []), make.__name__


def test_head_replaced_after_the_optimizer_and_its_twin(loops: Path) -> None:
    broken = probe(loops, "python headswap_train.py")
    assert ("params_not_updated", "head") in alarms(broken)
    rows = {r["name"]: r for r in broken.params}
    assert rows["head.weight"]["in_optimizer"] is False and rows["head.weight"]["gradient"] == "ok"
    assert any("module replaced after the optimizer was built" in n for n in broken.notes)
    assert probe(loops, "python headswap_train.py --late-optimizer").healthy


def test_linear_probe_whose_optimizer_holds_only_the_replaced_head_is_never_called_healthy(
    loops: Path,
) -> None:
    """Blind run j1 (round 3): with a frozen backbone the optimizer holds only the discarded head, so no
    model an optimizer trains ever runs; the probe said "healthy" and took the orphans for an input being
    optimised. The head that runs gets gradients no optimizer holds: that is the finding."""
    broken = probe(loops, "python headswap_train.py --frozen-backbone")
    assert not broken.healthy
    [f] = [f for f in broken.findings if f.severity != "info"]
    assert (f.code, f.severity, f.module) == ("params_not_updated", "error", "model.head")
    assert "built before model.head was replaced" in f.evidence["hint"]
    assert "input_optimization" not in {r["name"] for r in broken.regimes}
    assert probe(loops, "python headswap_train.py --frozen-backbone --late-optimizer").healthy


def test_nan_from_a_fully_masked_row_names_module_and_operation(loops: Path) -> None:
    report = probe(loops, "python nan_train.py --mask-all-padding", steps=2)
    assert report.nonfinite == {
        "phase": "forward",
        "module": "pool",
        "type": "Pool",
        "op": "softmax",
        "kind": "parent_code",
        "step": 1,
    }
    assert ("nonfinite_forward", "pool") in alarms(report)
    assert probe(loops, "python nan_train.py", steps=2).healthy


def test_canonical_workloads_stay_quiet_gan_and_lbfgs(loops: Path) -> None:
    gan = probe(loops, "python gan_train.py")
    assert gan.healthy, alarms(gan)
    assert [m["label"] for m in gan.models] == ["D", "G"] or [m["label"] for m in gan.models] == ["G", "D"]
    assert gan.losses_by_optimizer is not None and set(gan.losses_by_optimizer) == {"0", "1"}
    assert any(name.startswith(("G.", "D.")) for name in (r["name"] for r in gan.params))
    lbfgs = probe(loops, "python lbfgs_train.py")
    assert lbfgs.healthy, alarms(lbfgs)
    assert any("closure" in n for n in lbfgs.notes)


def test_a_later_window_and_a_run_shorter_than_asked(forecaster: Path) -> None:
    later = probe(forecaster, "python train.py --config configs/base.json", steps=2, start=10)
    assert later.observed_steps == [10, 11]
    assert ("no_gradient", "blocks.0.attn") in alarms(later)
    with pytest.raises(ProbeError) as err:
        probe(forecaster, "python -c 'import torch'")
    assert err.value.kind == "not_observed" or err.value.kind == "no_training_step"


def test_cli_takes_the_command_after_dashes(forecaster: Path) -> None:
    cli = [sys.executable, "-m", "trainsleuth", "probe"]
    out = subprocess.run(
        [*cli, "--json", "--steps", "2", "--", "python", "train.py", "--config", "configs/base.json"],
        cwd=forecaster,
        capture_output=True,
        text=True,
        timeout=600,
    )
    data = json.loads(out.stdout)
    assert data["ok"] and data["observed_steps"] == [1, 2] and data["healthy"] is False
    assert data["command"] == "python train.py --config configs/base.json"
    assert [f["code"] for f in data["findings"]] == ["no_gradient"]
    bare = subprocess.run([*cli, "--"], cwd=forecaster, capture_output=True, text=True, timeout=120)
    assert bare.returncode == 2 and "give the training command after --" in bare.stderr
    both = subprocess.run(
        [*cli, "x.py:make", "--", "python", "train.py"], cwd=forecaster, capture_output=True, text=True
    )
    assert both.returncode == 2 and "not several" in both.stderr


@pytest.mark.anyio
async def test_mcp_command_argument(forecaster: Path) -> None:
    server, _ = build_server(ServerConfig(workspaces=[forecaster], call_wait_s=600))
    async with Client(server) as client:
        r = await client.call_tool(
            "probe_gradients", {"command": "python train.py --config configs/fixed.json", "steps": 2}
        )
        assert not r.is_error, r.content[0].text
        data = r.structured_content
        assert data["healthy"] is True and data["observed_steps"] == [1, 2] and data["entrypoint"] is None
        assert data["command"] == "python train.py --config configs/fixed.json" and data["params"]
        assert "optimizer steps 1..2 of the real run" in r.content[0].text
        none = await client.call_tool("probe_gradients", {"steps": 2})
        assert none.is_error and "exactly one of command" in none.content[0].text
        two = await client.call_tool(
            "probe_gradients", {"command": "python train.py", "entrypoint": "train.py:main"}
        )
        assert two.is_error and "got command, entrypoint" in two.content[0].text
        bad = await client.call_tool("probe_gradients", {"command": "python 'unclosed"})
        assert bad.is_error and "cannot be split" in bad.content[0].text

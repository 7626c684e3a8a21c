"""The corpus's scripts through the command form, as a user runs it: `trainsleuth probe -- python X.py`.

The probe runs inside the user's own command (the observer and its probe plugin), so what only the real
loop shows is checked here: several optimizers, a copy outside every optimizer, a teacher trained in an
earlier phase (`--start` at the manifest's `observe_from`). Each command is a real subprocess of the
public CLI (about 10 s of CPU each, mostly torch's import), two at a time; a subset of the corpus runs here
(one workload per regime the command form adds, and every broken twin), the whole corpus through the
entrypoints in `test_workload_entrypoints.py` / `test_workload_twins.py`, and
`tests/workloads/MEASUREMENTS.md` records the command form on every script.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from workload_probe import MANIFEST

ROOT = Path(__file__).resolve().parent.parent
HEALTHY = {  # workload -> a regime the command form must report
    "dcgan": "adversarial",
    "reinforce": "rl",
    "mean_teacher": "ema_target",
    "style_transfer": "input_optimization",
}
TWINS = [
    "dcgan_d_never_steps",
    "dqn_target_is_online",
    "mean_teacher_ema_never_updated",
    "byol_target_trained_by_gradient",
    "distillation_teacher_train_mode",
    "logreg_lbfgs_closure_no_zero_grad",
    "wgan_gp_d_optimizer_over_g",
    "vae_kl_wrong_sign",
    "actor_critic_advantage_not_detached",
    "sparse_embedding_not_in_optimizer",
]


def _command(name: str) -> dict[str, Any]:
    workload = MANIFEST.BY_NAME[name]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    start = ["--start", str(workload.observe_from)] if workload.observe_from > 1 else []
    proc = subprocess.run(
        [sys.executable, "-m", "trainsleuth", "probe", "--json", *start, "--", "python", workload.script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode in (0, 1), f"{name}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def reports() -> dict[str, dict[str, Any]]:
    names = list(HEALTHY) + TWINS
    with ThreadPoolExecutor(max_workers=int(os.environ.get("TRAINSLEUTH_WORKLOAD_JOBS", "2"))) as pool:
        return dict(zip(names, pool.map(_command, names), strict=True))


@pytest.mark.parametrize("name", list(HEALTHY))
def test_healthy_command_is_quiet_and_names_its_regime(reports: dict[str, dict[str, Any]], name: str) -> None:
    report = reports[name]
    alarms = [(f["code"], f["module"]) for f in report["findings"] if f["severity"] != "info"]
    assert alarms == [], alarms
    assert report["mode"] == "observed" and report["observed_steps"]
    assert HEALTHY[name] in {r["name"] for r in report["regimes"]}
    assert report["regime"].startswith("Assumed regime: ")


@pytest.mark.parametrize("name", TWINS)
def test_broken_twin_is_found_in_the_real_loop(reports: dict[str, dict[str, Any]], name: str) -> None:
    twin = MANIFEST.BY_NAME[name]
    report = reports[name]
    hits = [f for f in report["findings"] if f["code"] == twin.code and f["severity"] in ("warning", "error")]
    if twin.modules:
        hits = [f for f in hits if f["module"] in twin.modules]
    got = [(f["code"], f["module"]) for f in report["findings"]]
    assert hits, (twin.code, twin.modules, got)
    assert report["regime"].startswith("Assumed regime: ")


def test_every_broken_twin_runs_through_the_command_form() -> None:
    assert set(TWINS) == {w.name for w in MANIFEST.BROKEN}

"""Every workload of the corpus runs as its user would run it, and every healthy one really learns.

Each script in `tests/workloads/` (and its broken twins in `tests/workloads/broken/`) runs in a
process of its own with its default number of steps, as `python tests/workloads/<name>.py` runs it.
Healthy ones must exit 0 and move their own metric the right way by the manifest's margin (a check of
learning, not just of running); broken ones must run to the end without an error (their bugs are
silent), and where the manifest says the bug shows in the metric, end measurably worse than their
healthy twin.

Importing torch costs about 4 s of CPU per process, several times what most workloads take to train,
so the corpus runs through `tests/workload_runner.py`: one process of this interpreter imports torch
once and forks a child per script, which runs the file as `__main__` with its own argv and output
(2 at a time, `TRAINSLEUTH_WORKLOAD_JOBS`). `TRAINSLEUTH_WORKLOADS_DIRECT=1` runs every script as
`python SCRIPT` instead; `test_the_real_commands_run` always does so for a healthy script and a
broken twin.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "workloads"
HELPERS = {"manifest.py", "synthetic.py", "toy_envs.py"}
LINE = re.compile(r"^(step|eval) (\d+) (.*)$")


def _load_manifest() -> Any:
    spec = importlib.util.spec_from_file_location("_workload_manifest", CORPUS / "manifest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building the class
    spec.loader.exec_module(module)
    return module


MANIFEST = _load_manifest()
HEALTHY = [w.name for w in MANIFEST.HEALTHY]
BROKEN = [w.name for w in MANIFEST.BROKEN]


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def records(self, kind: str) -> list[tuple[int, dict[str, float]]]:
        out = []
        for line in self.stdout.splitlines():
            match = LINE.match(line)
            if match and match.group(1) == kind:
                values = dict(pair.split("=", 1) for pair in match.group(3).split())
                out.append((int(match.group(2)), {k: float(v) for k, v in values.items()}))
        return out

    def start_and_end(self, metric: str, source: str) -> tuple[float, float]:
        """The first and last eval value, or the means of the first and last quarter of step values."""
        series = [values[metric] for _, values in self.records(source) if metric in values]
        assert len(series) >= 2, f"fewer than two {source} values of {metric}"
        if source == "eval":
            return series[0], series[-1]
        quarter = max(1, len(series) // 4)
        return sum(series[:quarter]) / quarter, sum(series[-quarter:]) / quarter


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def run_script(script: str, *args: str) -> Run:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, script, *args], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300
    )
    return Run(proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - start)


def run_forked(workloads: list[Any], jobs: int) -> dict[str, Run]:
    todo = [{"name": w.name, "argv": [w.script]} for w in workloads]
    proc = subprocess.run(
        [sys.executable, "tests/workload_runner.py", "--jobs", str(jobs)],
        input=json.dumps(todo), cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    return {r["name"]: Run(r["returncode"], r["stdout"], r["stderr"], r["seconds"]) for r in results}


@pytest.fixture(scope="module")
def runs() -> dict[str, Run]:
    jobs = int(os.environ.get("TRAINSLEUTH_WORKLOAD_JOBS", "2"))
    if os.environ.get("TRAINSLEUTH_WORKLOADS_DIRECT") == "1":
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {w.name: pool.submit(run_script, w.script) for w in MANIFEST.WORKLOADS}
            return {name: future.result() for name, future in futures.items()}
    results = run_forked(list(MANIFEST.WORKLOADS), jobs)
    assert set(results) == set(MANIFEST.BY_NAME)
    return results


def _failure(run: Run) -> str:
    return f"exit {run.returncode}\n--- stderr tail ---\n{run.stderr[-3000:]}\n--- stdout tail ---\n{run.stdout[-1500:]}"


def _assert_ran_to_the_end(name: str, run: Run) -> None:
    workload = MANIFEST.BY_NAME[name]
    assert run.returncode == 0, _failure(run)
    assert "Traceback" not in run.stderr, _failure(run)
    steps = run.records("step")
    assert steps, f"{name} printed no step lines"
    assert steps[-1][0] == workload.default_steps, f"{name} stopped at step {steps[-1][0]}"
    bad = [
        (s, k) for s, values in steps + run.records("eval") for k, v in values.items() if not math.isfinite(v)
    ]
    if workload.healthy:
        assert not bad, f"{name} printed non-finite values: {bad[:5]}"


# ---------------------------------------------------------------------------------------- manifest


def test_manifest_lists_every_script_and_nothing_else() -> None:
    on_disk = {f"tests/workloads/{p.name}" for p in CORPUS.glob("*.py") if p.name not in HELPERS}
    on_disk |= {f"tests/workloads/broken/{p.name}" for p in (CORPUS / "broken").glob("*.py")}
    assert on_disk == {w.script for w in MANIFEST.WORKLOADS}
    assert len(MANIFEST.BY_NAME) == len(MANIFEST.WORKLOADS), "duplicate workload names"


def test_corpus_covers_the_field() -> None:
    assert len(HEALTHY) >= 32
    families = {w.family for w in MANIFEST.HEALTHY}
    for family in ("GAN", "VAE", "diffusion", "contrastive", "RL", "graph network", "style transfer"):
        assert family in families, family
    regimes = {r for w in MANIFEST.WORKLOADS for r in w.regimes}
    assert regimes <= set(MANIFEST.REGIMES), regimes - set(MANIFEST.REGIMES)
    for regime in (
        "adversarial",
        "rl",
        "closure",
        "kl",
        "ema_target",
        "frozen_teacher",
        "sparse",
        "weight_tied",
    ):
        assert regime in regimes, regime
    assert all(w.checks for w in MANIFEST.HEALTHY), "a healthy workload without a learning check"


def test_broken_twins_name_their_bug_module_and_code() -> None:
    known_codes = set(
        re.findall(r"^\| `(\w+)` \|", (ROOT / "docs" / "spec" / "findings.md").read_text(), re.M)
    )
    for w in MANIFEST.BROKEN:
        assert w.twin_of in MANIFEST.BY_NAME and MANIFEST.BY_NAME[w.twin_of].healthy, w.name
        assert w.code is not None
        assert (w.code in known_codes) != w.code_proposed, f"{w.name}: {w.code} known={w.code in known_codes}"
        doc = (ROOT / w.script).read_text().split('"""')[1]
        assert "Bug:" in doc and f"`{w.code}`" in doc, w.name
        assert ("PROPOSED" in doc) == w.code_proposed, w.name
        for module in w.modules:
            assert f"`{module}`" in doc, (w.name, module)


# ------------------------------------------------------------------------------------------- runs


@pytest.mark.slow
@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_workload_learns(runs: dict[str, Run], name: str) -> None:
    run = runs[name]
    _assert_ran_to_the_end(name, run)
    for check in MANIFEST.BY_NAME[name].checks:
        start, end = run.start_and_end(check.metric, check.source)
        change = start - end if check.direction == "down" else end - start
        assert change >= check.min_change, (
            f"{name}: {check.metric} went {start:.4g} -> {end:.4g}, wanted {check.direction} by {check.min_change}"
        )


@pytest.mark.slow
@pytest.mark.parametrize("name", BROKEN)
def test_broken_workload_runs_silently(runs: dict[str, Run], name: str) -> None:
    workload = MANIFEST.BY_NAME[name]
    run = runs[name]
    _assert_ran_to_the_end(name, run)
    if workload.symptom_gap is None:
        return
    check = MANIFEST.BY_NAME[workload.twin_of].checks[0]
    _, healthy_end = runs[workload.twin_of].start_and_end(check.metric, check.source)
    _, broken_end = run.start_and_end(check.metric, check.source)
    gap = broken_end - healthy_end if check.direction == "down" else healthy_end - broken_end
    assert gap >= workload.symptom_gap, (
        f"{name} ends at {check.metric}={broken_end:.4g}, its healthy twin at {healthy_end:.4g}"
    )


def test_the_real_commands_run(runs: dict[str, Run]) -> None:
    """`python SCRIPT` itself: --steps is honoured, output is seeded, a broken twin finds its healthy module."""
    first = run_script("tests/workloads/polynomial_regression.py", "--steps", "5")
    second = run_script("tests/workloads/polynomial_regression.py", "--steps", "5")
    assert first.returncode == 0, _failure(first)
    assert [s for s, _ in first.records("step")] == [1, 2, 3, 4, 5]
    assert first.stdout == second.stdout, "the same command printed different numbers: not seeded"
    name = "logreg_lbfgs_closure_no_zero_grad"
    direct = run_script(MANIFEST.BY_NAME[name].script)
    assert direct.returncode == 0, _failure(direct)
    assert direct.stdout == runs[name].stdout, "the forked runner and the real command disagree"

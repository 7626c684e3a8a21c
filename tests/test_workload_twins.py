"""Every broken twin of the workload corpus is found by the probe, with the manifest's code and module.

The twins' entrypoints (`tests/workloads/entrypoints/broken_twins.py`: the healthy builders given each
twin's buggy piece) are driven in this process as in `test_workload_entrypoints.py`; two of them, and a
healthy workload, also through the public CLI (`trainsleuth probe FILE:FN --json`, a real subprocess),
so the report's regime field and sentence are checked where a user reads them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from workload_probe import ENTRYPOINTS, MANIFEST, _functions, expected_regimes, probe

ROOT = Path(__file__).resolve().parent.parent
BROKEN = _functions("broken_twins", "BROKEN")


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Any:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_every_broken_twin_has_an_entrypoint() -> None:
    twins = {p.stem for p in (ENTRYPOINTS.parent / "broken").glob("*.py")}
    assert set(BROKEN) == twins == {w.name for w in MANIFEST.BROKEN}


def _found(findings: list[dict[str, Any]], code: str, modules: tuple[str, ...]) -> list[dict[str, Any]]:
    hits = [f for f in findings if f["code"] == code and f["severity"] in ("warning", "error")]
    if modules:
        hits = [f for f in hits if f["module"] in modules]
    return hits


@pytest.mark.parametrize("fn", BROKEN)
def test_broken_twin_is_found_with_its_module(fn: str) -> None:
    twin = MANIFEST.BY_NAME[fn]
    stats, findings, _ = probe("broken_twins", fn)
    got = [(f["code"], f["module"]) for f in findings if f["severity"] != "info"]
    assert _found(findings, twin.code, twin.modules), (twin.code, twin.modules, got)
    assert stats["internal_errors"] == []
    assert expected_regimes(fn) <= {r["name"] for r in stats["regimes"]}


def _cli(entry: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "trainsleuth", "probe", entry, "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize(
    ("fn", "regime"),
    [("vae_kl_wrong_sign", "kl"), ("actor_critic_advantage_not_detached", "rl")],
)
def test_the_cli_reports_the_twin_and_its_regime(fn: str, regime: str) -> None:
    twin = MANIFEST.BY_NAME[fn]
    report = _cli(f"tests/workloads/entrypoints/broken_twins.py:{fn}")
    assert report["healthy"] is False
    assert _found(report["findings"], twin.code, twin.modules)
    assert regime in {r["name"] for r in report["regimes"]}
    assert report["regime"].startswith("Assumed regime: ") and regime in report["regime"]
    assert all(r["because"] and r["effects"] for r in report["regimes"])


def test_the_cli_text_says_which_regime_it_assumed() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "trainsleuth", "probe", "tests/workloads/entrypoints/healthy.py:wgan_gp"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "healthy" in proc.stdout.splitlines()[0]
    regime = next(line for line in proc.stdout.splitlines() if line.startswith("Assumed regime:"))
    assert "adversarial" in regime and "loss trend is not judged" in regime

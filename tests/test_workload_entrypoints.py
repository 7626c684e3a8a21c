"""The whole workload corpus through the probe's entrypoints: 0 alarms on the healthy workloads, the regime
each one is recognised as, and the regime in the report.

Each builder (`tests/workloads/entrypoints/healthy.py`, hand-written; `scripts.py`, the script captured at
its first step as `trainsleuth probe --scaffold` does) is loaded the way `trainsleuth probe FILE.py:FN`
loads it, driven by the probe's own runner for the probe's default 8 steps (a workload whose script takes
fewer, L-BFGS's 4, for that many) in this process, and judged by the rules with the regimes the probe
detected. The broken twins are in `test_workload_twins.py`; the command form
(`trainsleuth probe -- python tests/workloads/X.py`) in `test_workload_commands.py`.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from workload_probe import MANIFEST, _functions, expected_regimes, probe

from trainsleuth.tools.runners import _ts_probe_rules


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Any:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


HEALTHY = [("healthy", fn) for fn in _functions("healthy", "HEALTHY")] + [
    ("scripts", fn) for fn in _functions("scripts", "SCRIPTS")
]


def test_every_healthy_workload_is_probed() -> None:
    assert {fn for _, fn in HEALTHY} == {w.name for w in MANIFEST.HEALTHY}


@pytest.mark.parametrize(("file", "fn"), HEALTHY, ids=[fn for _, fn in HEALTHY])
def test_healthy_workload_is_quiet_in_its_regime(file: str, fn: str) -> None:
    stats, findings, _ = probe(file, fn)
    alarms = [(f["code"], f["module"], f["message"]) for f in findings if f["severity"] != "info"]
    assert alarms == [], alarms
    assert stats["internal_errors"] == []
    detected = {r["name"] for r in stats["regimes"]}
    assert expected_regimes(fn) <= detected, (fn, detected)
    sentence = _ts_probe_rules.regimes.sentence(stats["regimes"])
    assert sentence.startswith("Assumed regime: ")
    for name in expected_regimes(fn):
        assert name in sentence
    if not detected & {"adversarial", "rl"}:
        assert "supervised" in detected  # one loss that should go down: every rule applies

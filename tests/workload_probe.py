"""Shared by the corpus's probe tests: load the manifest and the entrypoints, drive one through the probe.

`probe(file, fn)` runs an entrypoint of `tests/workloads/entrypoints/` the way `trainsleuth probe FILE:FN`
does (the probe's runner, its default 8 steps, fewer where the workload's script takes fewer) in this
process, and judges it with the regimes the probe detected.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import torch

from trainsleuth.tools.runners import _ts_entrypoint, _ts_probe_core, _ts_probe_rules, probe_runner

WORKLOADS = Path(__file__).resolve().parent / "workloads"
ENTRYPOINTS = WORKLOADS / "entrypoints"
PROBE_STEPS = 8

# the regimes the probe recognises from what it observes (the manifest's other labels are descriptions)
DETECTABLE = {"adversarial", "rl", "closure", "kl", "ema_target", "frozen_teacher", "sparse"}
# labels of the manifest the entrypoint cannot show, and why (kept visible, not silently dropped)
NOT_OBSERVABLE = {
    ("dqn", "rl"): "value-based: no log-probability in its loss; it is recognised by its target network",
    (
        "style_transfer",
        "frozen_teacher",
    ): "the entrypoint holds the frozen CNN inside the trained canvas module",
    ("dqn_target_is_online", "ema_target"): "the bug: there is no separate target network to see",
    ("dqn_target_is_online", "rl"): "value-based: no log-probability in its loss",
    ("wgan_gp_d_optimizer_over_g", "adversarial"): "the bug: both optimizers hold the generator",
}
# what the probe also recognises beyond the manifest's labels (the optimizer's own step rule, the model)
EXTRA = {
    "logreg_lbfgs": {"linear_model"},
    "polynomial_regression": {"linear_model"},
    "wide_and_deep": {"accumulating_optimizer"},
    "mnist_adadelta": {"accumulating_optimizer"},
    "siamese": {"accumulating_optimizer"},
}


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building the class
    spec.loader.exec_module(module)
    return module


MANIFEST = _load(WORKLOADS / "manifest.py", "_workload_manifest_ep")


def _functions(file: str, attr: str) -> list[str]:
    return [f.__name__ for f in getattr(_load(ENTRYPOINTS / f"{file}.py", f"_entrypoints_{file}"), attr)]


def expected_regimes(name: str) -> set[str]:
    labels = set(MANIFEST.BY_NAME[name].regimes) & DETECTABLE
    return {r for r in labels if (name, r) not in NOT_OBSERVABLE} | EXTRA.get(name, set())


def probe(file: str, fn: str) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """Drive an entrypoint as `trainsleuth probe` does; (stats, findings, notes)."""
    contract = _ts_entrypoint.load_contract(f"{ENTRYPOINTS / file}.py:{fn}")
    steps = min(PROBE_STEPS, MANIFEST.BY_NAME[fn].default_steps)
    stats = probe_runner.drive(contract, steps, _ts_probe_core, torch)
    notes = list(stats.get("notes") or [])
    stats["regimes"] = _ts_probe_rules.regimes.detect(stats)
    return stats, _ts_probe_rules.analyze(stats, notes), notes

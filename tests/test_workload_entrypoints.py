"""The corpus's probe entrypoints (`tests/workloads/entrypoints/`) keep to the entrypoint contract.

Each builder is loaded the way `trainsleuth probe FILE.py:FUNCTION` loads it and driven by the probe's
own runner for two steps in this process. What today's probe reports on them is measured, not asserted
here (see the table in tests/workloads/SOURCES.md); the regime-aware rules will assert 0 alarms on the
healthy ones and the manifest's finding on the broken ones.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from trainsleuth.tools.runners import _ts_entrypoint, _ts_probe_core, probe_runner

ENTRYPOINTS = Path(__file__).resolve().parent / "workloads" / "entrypoints"


def _functions(file: str, attr: str) -> list[str]:
    spec = importlib.util.spec_from_file_location(f"_entrypoints_{file}", ENTRYPOINTS / f"{file}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return [f.__name__ for f in getattr(module, attr)]


# Probe bugs these entrypoints expose today (issue 28), kept visible: each flips to a failure once fixed.
_SPARSE_GRAD = (
    "the probe takes linalg_vector_norm of a sparse gradient (nn.EmbeddingBag(sparse=True)) and fails"
)
KNOWN_PROBE_BUGS = {
    (
        "healthy",
        "gcn",
    ): "the probe applies aten::ne to a sparse COO input (the adjacency passed to forward) and fails",
    ("healthy", "sparse_embedding_sparseadam"): _SPARSE_GRAD,
    ("broken_twins", "sparse_embedding_not_in_optimizer"): _SPARSE_GRAD,
}
CASES = [
    pytest.param(kind, fn, marks=pytest.mark.xfail(strict=True, reason=KNOWN_PROBE_BUGS[(kind, fn)]))
    if (kind, fn) in KNOWN_PROBE_BUGS
    else (kind, fn)
    for kind, attr in (("healthy", "HEALTHY"), ("broken_twins", "BROKEN"))
    for fn in _functions(kind, attr)
]


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Any:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_every_broken_twin_has_an_entrypoint() -> None:
    twins = {p.stem for p in (ENTRYPOINTS.parent / "broken").glob("*.py")}
    assert set(_functions("broken_twins", "BROKEN")) == twins


@pytest.mark.parametrize(("file", "fn"), CASES)
def test_entrypoint_drives(file: str, fn: str) -> None:
    contract = _ts_entrypoint.load_contract(f"{ENTRYPOINTS / file}.py:{fn}")
    stats = probe_runner.drive(contract, 2, _ts_probe_core, torch)
    assert stats["internal_errors"] == []
    assert stats["steps"] == 2, stats.get("stopped")

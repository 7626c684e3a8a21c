"""The alignment and comparison rules of trace_diff on hand-made traces (the pure functions under the tool;
tests/test_trace_pairs.py runs them on real trainings)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from trainsleuth.tools.trace.compare import differences, distance, measure_noise
from trainsleuth.tools.trace.invariants import infer_and_check
from trainsleuth.tools.trace.report import build_report
from trainsleuth.tools.trace.traces import ProcTrace, VariantTrace, site_key


def stats(norm: float, n: int = 4, mean: float = 0.1, fp: float = 0.5) -> dict[str, Any]:
    return {"n": n, "mean": mean, "std": 0.2, "norm": norm, "fp": fp}


def ev(kind: str, fn: str, k: int = 1, **kw: Any) -> dict[str, Any]:
    return {"kind": kind, "fn": fn, "k": k, **kw}


def proc(events: list[dict[str, Any]], rank: int = 0) -> ProcTrace:
    for i, e in enumerate(events, 1):
        e["s"] = i
    names = {
        "r0": "model",
        "r0/fc.weight": "model.fc.weight",
        "r0/fc.bias": "model.fc.bias",
        "r0/bn.running_mean": "model.bn.running_mean",
    }
    return ProcTrace(rank=rank, node=0, pid=1, events=events, names=names)


def training(
    site_prefix: str = "train.py",
    line_shift: int = 0,
    func: str = "main",
    extra: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    s = lambda line: f"{site_prefix}:{line + line_shift} in {func}"  # noqa: E731
    out = [
        ev(
            "init",
            "torch.nn.init.normal_",
            t="r0/fc.weight",
            site=s(10),
            args={"mean": 0.0, "std": 0.02},
            out=stats(1.0),
        ),
        ev("mode", "Module.train", t="r0", site=s(12), args={"mode": True}),
        *(extra or []),
    ]
    for k in (1, 2, 3):
        out += [
            ev("call", "forward", k, t="r0", site=s(14), mode=True, out=stats(2.0 + k)),
            ev(
                "backward",
                "loss.backward",
                k,
                out={"n": 1, "mean": 1.0 / k, "std": 0.0, "norm": 1.0 / k, "fp": 0.5 / k},
            ),
            ev(
                "param",
                "SGD.step",
                k,
                t="r0/fc.weight",
                site=s(16),
                out=stats(1.0 + k),
                grad=stats(0.1),
                changed=True,
            ),
            ev("buffer", "end_of_step", k, t="r0/bn.running_mean", out=stats(0.5 * k)),
        ]
    return out


def report(a: list[dict[str, Any]], b: list[dict[str, Any]], a2: list[dict[str, Any]] | None = None) -> Any:
    a2 = a2 if a2 is not None else [dict(e) for e in a]
    return build_report(
        VariantTrace("a", [proc(a)]), VariantTrace("a", [proc(a2)]), VariantTrace("b", [proc(b)]), []
    )


def test_a_harmless_refactor_aligns_completely() -> None:
    """Moved lines, another file name for the same code, a renamed helper: nothing differs."""
    assert report(training(), training(line_shift=7)).verdict == "identical"
    renamed = report(training(), training(func="run_training"))
    assert renamed.verdict == "identical", renamed.summary
    assert site_key("pkg/train.py:12 in main") == ("train.py", "main")


def test_an_extra_call_is_missing_from_the_other_variant_with_both_sites() -> None:
    extra = [
        ev(
            "init",
            "torch.nn.init.normal_",
            t="r0/fc.weight",
            site="train.py:11 in main",
            args={"mean": 0.0, "std": 0.02},
            out=stats(1.1),
        )
    ]
    rep = report(training(), training(extra=extra))
    first = rep.first_difference
    assert first is not None and first.code == "call_missing" and first.only_in == "b"
    assert first.site_b == "train.py:11 in main" and "(2 times in b, 1 in a)" in first.message


def test_a_changed_argument_and_a_changed_order() -> None:
    b = training()
    b[0] = dict(b[0], args={"mean": 0.0, "std": 0.2})
    first = report(training(), b).first_difference
    assert first is not None and first.code == "call_args"
    assert first.changes == [{"arg": "std", "a": 0.02, "b": 0.2}]
    swapped = training()
    swapped[0], swapped[1] = swapped[1], swapped[0]
    first = report(training(), swapped).first_difference
    assert first is not None and first.code == "call_order"


def test_values_count_only_beyond_the_noise_band() -> None:
    a = training()
    b = training()
    b[4] = dict(b[4], out=stats(2.0 * (1 + 5e-5)))  # step 1's parameter after the step: inside the tolerance
    rep = report(a, b)
    assert rep.verdict == "within_noise" and rep.noise.within_noise == 1
    b[4] = dict(b[4], out=stats(2.0 * 1.01))
    rep = report(a, b)
    assert rep.first_difference is not None and rep.first_difference.code == "trace_divergence"
    # The same change, but the good variant differs from itself by as much: noise, not a difference.
    a2 = training()
    a2[4] = dict(a2[4], out=stats(2.0 * 1.02))
    assert report(a, b, a2).verdict == "within_noise"


def test_an_update_that_stops_reaching_a_parameter() -> None:
    b = training()
    for e in b:
        if e["kind"] == "param" and e["k"] >= 2:
            e.update(changed=False, grad=None, out=stats(2.0))
    rep = report(training(), b)
    first = rep.first_difference
    assert (
        first is not None
        and first.code == "update_lost"
        and first.step == 2
        and "it had no gradient" in first.message
    )
    [inv] = [x for x in rep.invariants if x.invariant == "param_updated"]
    assert inv.step == 2 and inv.subjects == ["model.fc.weight"]


def test_distance() -> None:
    assert distance(stats(1.0), stats(1.0)) == 0.0
    assert 0 < distance(stats(1.0), stats(1.001)) < 0.01
    assert math.isinf(distance(stats(1.0), stats(1.0, n=5)))
    assert math.isinf(distance(stats(1.0), dict(stats(1.0), nonfinite=2)))
    assert math.isinf(distance(stats(1.0), None))
    assert distance({"value": 2.0}, {"value": 2.2}) == pytest.approx(0.2 / 2.2)


def test_invariants_of_modes_and_ranks() -> None:
    a = training()
    b = training()
    for e in b:
        if e["kind"] == "call" and e["k"] == 3:
            e["mode"] = False
    breaks = infer_and_check([VariantTrace("a", [proc(a)])], VariantTrace("b", [proc(b)]))
    assert [(x.invariant, x.step) for x in breaks if x.invariant == "mode_at_site"] == [("mode_at_site", 3)]
    # Two ranks, equal in the good run; rank 1 differs from step 2 in the bad one.
    good = VariantTrace("a", [proc(training(), 0), proc(training(), 1)])
    bad_r1 = training()
    for e in bad_r1:
        if e["kind"] == "param" and e["k"] >= 2:
            e["out"] = stats(9.0)
    bad = VariantTrace("b", [proc(training(), 0), proc(bad_r1, 1)])
    ranks = [x for x in infer_and_check([good], bad) if x.invariant == "ranks_equal"]
    assert ranks and ranks[0].step == 2 and ranks[0].rank == 1


def test_noise_marks_events_that_do_not_reproduce() -> None:
    a = training()
    a2 = training()
    a2.insert(2, ev("call", "Module.zero_grad", t="r0", site="train.py:13 in main"))
    noise = measure_noise(proc(a), proc(a2))
    assert noise.differences == 0  # an event a2 has and a lacks does not make any of a's events unstable
    a2 = training()
    a2[0] = dict(a2[0], args={"mean": 0.0, "std": 0.05})
    noise = measure_noise(proc(a), proc(a2))
    assert int(a[0]["s"]) in noise.unstable
    found, _ = differences(proc(a), proc(a2), noise)
    assert not [d for d in found if d.a is a[0]]

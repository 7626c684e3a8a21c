"""Invariants of the good variant, checked on the other one.

A pair of traces shows where two runs part; some bugs are better named as a rule the good run keeps
and the other breaks. From every observed step of both good runs (and every rank) this infers:

- `param_updated`: each optimizer step changes the parameter;
- `buffer_constant` / `buffer_updated`: a buffer never changes, or changes at every step;
- `mode_at_site`: the model is in the same train/eval mode every time it is called from one place;
- `ranks_equal`: a collective's result, a parameter after the step, a gradient before it are equal
  on every rank.

A rule needs at least two observed steps to be inferred. Each is checked on the other variant and
reported with the step where it first breaks (and the rank).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainsleuth.tools.trace.traces import ProcTrace, VariantTrace, site_key

MIN_STEPS = 2


@dataclass
class Break:
    invariant: str
    subjects: list[str]  # stable keys (r0/fc.weight, a site)
    step: int
    rank: int | None
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)


def _series(proc: ProcTrace, kind: str) -> dict[str, dict[int, dict[str, Any]]]:
    """kind's events by subject, then step (the last event of that step)."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for ev in proc.events:
        if ev.get("kind") == kind and ev.get("t"):
            out.setdefault(ev["t"], {})[int(ev["k"])] = ev
    return out


def _fp(ev: dict[str, Any] | None) -> Any:
    out = (ev or {}).get("out") or {}
    return (out.get("fp"), out.get("norm"), out.get("n"))


def _holds_everywhere(goods: list[ProcTrace], check: Any) -> bool:
    return all(check(p) for p in goods)


def infer_and_check(good_runs: list[VariantTrace], bad: VariantTrace) -> list[Break]:
    breaks: list[Break] = []
    for rank, pb in bad.by_rank().items():
        goods = [g.by_rank()[rank] for g in good_runs if rank in g.by_rank()]
        if not goods:
            continue
        breaks += _param_updated(goods, pb)
        breaks += _buffers(goods, pb)
        breaks += _mode_at_site(goods, pb)
    breaks += _ranks_equal(good_runs, bad)
    breaks.sort(key=lambda b: (b.step, b.rank or 0, b.invariant))
    return _grouped(breaks)


def _param_updated(goods: list[ProcTrace], pb: ProcTrace) -> list[Break]:
    found: list[Break] = []
    bad_series = _series(pb, "param")
    candidates = None
    for g in goods:
        held = {
            t
            for t, steps in _series(g, "param").items()
            if len(steps) >= MIN_STEPS and all(e.get("changed") for e in steps.values())
        }
        candidates = held if candidates is None else candidates & held
    steps_good = sorted(_series(goods[0], "param").get(next(iter(candidates or []), ""), {}).keys())
    for t in sorted(candidates or []):
        series = bad_series.get(t, {})
        for k in steps_good:
            if k not in {int(e["k"]) for e in pb.events}:
                break  # the bad run ended before this step
            ev = series.get(k)
            if ev is None or not ev.get("changed"):
                why = (
                    "was not stepped"
                    if ev is None or ev.get("fn") == "unstepped"
                    else "was stepped but did not change"
                )
                if ev is not None and ev.get("fn") != "unstepped" and ev.get("grad") is None:
                    why = "had no gradient, so the step left it unchanged"
                found.append(
                    Break(
                        "param_updated",
                        [t],
                        k,
                        pb.rank,
                        why,
                        {"site": (ev or {}).get("site"), "held_over_steps": len(steps_good)},
                    )
                )
                break
    return found


def _buffers(goods: list[ProcTrace], pb: ProcTrace) -> list[Break]:
    found: list[Break] = []
    constant: set[str] | None = None
    updated: set[str] | None = None
    for g in goods:
        c, u = set(), set()
        for t, steps in _series(g, "buffer").items():
            ks = sorted(steps)
            if len(ks) < MIN_STEPS:
                continue
            values = [_fp(steps[k]) for k in ks]
            if all(v == values[0] for v in values):
                c.add(t)
            elif all(values[i] != values[i - 1] for i in range(1, len(values))):
                u.add(t)
        constant = c if constant is None else constant & c
        updated = u if updated is None else updated & u
    bad_series = _series(pb, "buffer")
    for t in sorted(constant or []):
        steps = bad_series.get(t, {})
        ks = sorted(steps)
        for i in range(1, len(ks)):
            if _fp(steps[ks[i]]) != _fp(steps[ks[i - 1]]):
                found.append(Break("buffer_constant", [t], ks[i], pb.rank, "changed", {}))
                break
    for t in sorted(updated or []):
        steps = bad_series.get(t, {})
        ks = sorted(steps)
        for i in range(1, len(ks)):
            if _fp(steps[ks[i]]) == _fp(steps[ks[i - 1]]):
                found.append(Break("buffer_updated", [t], ks[i], pb.rank, "stopped changing", {}))
                break
    return found


def _mode_at_site(goods: list[ProcTrace], pb: ProcTrace) -> list[Break]:
    modes: dict[tuple[Any, ...], set[bool]] = {}
    for g in goods:
        for ev in g.events:
            if ev.get("kind") == "call" and ev.get("fn") == "forward":
                key = (ev.get("t"), site_key(ev.get("site")))
                modes.setdefault(key, set()).add(bool(ev.get("mode")))
    found: list[Break] = []
    reported: set[tuple[Any, ...]] = set()
    for ev in pb.events:
        if ev.get("kind") != "call" or ev.get("fn") != "forward":
            continue
        key = (ev.get("t"), site_key(ev.get("site")))
        seen = modes.get(key)
        if seen is None or len(seen) != 1 or key in reported:
            continue
        expected = next(iter(seen))
        if bool(ev.get("mode")) != expected:
            reported.add(key)
            found.append(
                Break(
                    "mode_at_site",
                    [str(ev.get("t"))],
                    int(ev["k"]),
                    pb.rank,
                    f"called in {'training' if ev.get('mode') else 'eval'} mode where the good run is always in "
                    f"{'training' if expected else 'eval'} mode",
                    {"site": ev.get("site")},
                )
            )
    return found


def _rank_values(run: VariantTrace) -> dict[tuple[Any, ...], dict[int, Any]]:
    """(what, step) -> rank -> value summary, for collectives (by site and order), parameters and gradients."""
    out: dict[tuple[Any, ...], dict[int, Any]] = {}
    for proc in run.procs:
        order: dict[tuple[Any, ...], int] = {}
        for ev in proc.events:
            kind = ev.get("kind")
            k = int(ev.get("k", 0))
            if kind == "collective" and ev.get("out") is not None:
                base = (ev.get("fn"), site_key(ev.get("site")), k)
                order[base] = order.get(base, 0) + 1
                out.setdefault(("collective", *base, order[base]), {})[proc.rank] = _fp({"out": ev["out"]})
            elif kind == "param" and ev.get("fn") != "unstepped":
                out.setdefault(("param", ev.get("t"), k), {})[proc.rank] = _fp(ev)
                if ev.get("grad") is not None:
                    out.setdefault(("grad", ev.get("t"), k), {})[proc.rank] = _fp({"out": ev["grad"]})
    return out


def _ranks_equal(good_runs: list[VariantTrace], bad: VariantTrace) -> list[Break]:
    if len(bad.procs) < 2 or any(len(g.procs) < 2 for g in good_runs):
        return []
    held: set[tuple[Any, ...]] | None = None
    for g in good_runs:
        per_key = _rank_values(g)
        ok = {
            key for key, by_rank in per_key.items() if len(by_rank) >= 2 and len(set(by_rank.values())) == 1
        }
        held = ok if held is None else held & ok
    if not held:
        return []
    reference = _rank_values(good_runs[0])
    earliest: dict[tuple[str, str], Break] = {}
    for key, by_rank in _rank_values(bad).items():
        if key not in held or len(by_rank) < 2:
            continue
        values = list(by_rank.values())
        if all(v == values[0] for v in values):
            continue
        good = reference.get(key, {})
        odd = sorted(r for r, v in by_rank.items() if good.get(r) is not None and v != good.get(r))
        if not odd or len(odd) == len(by_rank):
            majority = max(set(values), key=values.count)
            odd = sorted(r for r, v in by_rank.items() if v != majority) or sorted(by_rank)
        what = key[0]
        if what == "collective":
            where = f" at {key[2][0]}:{key[2][1]}" if key[2] else ""
            subject, step = f"{key[1]}{where}", key[3]
        else:
            subject, step = str(key[1]), key[2]
        group = (what, subject)
        if group in earliest and earliest[group].step <= int(step):
            continue
        earliest[group] = Break(
            "ranks_equal",
            [subject],
            int(step),
            odd[0],
            f"differs on rank {', '.join(map(str, odd))} while it is equal on every rank in the good run",
            {"kind": what, "differing_ranks": odd},
        )
    return list(earliest.values())


def _grouped(breaks: list[Break]) -> list[Break]:
    """One record per invariant, step and rank (many parameters stop updating at once)."""
    out: list[Break] = []
    index: dict[tuple[Any, ...], Break] = {}
    for b in breaks:
        key = (b.invariant, b.step, b.rank, b.message, b.evidence.get("kind"))
        if key in index:
            index[key].subjects.extend(b.subjects)
            continue
        index[key] = b
        out.append(b)
    return out

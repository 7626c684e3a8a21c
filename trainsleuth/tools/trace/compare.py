"""What differs between two aligned events, and by how much, against the good variant's own noise.

A value is compared through its summary (size, mean, std, norm, fingerprint): the distance is the
largest relative change among them, so 0 means bitwise-equal summaries. The noise band of an event is
the distance between the same event in two runs of the good variant (and, so that one lucky event
does not make the band too tight, the largest such distance among events of the same kind up to that
step). A value difference counts only beyond `max(TOLERANCE, BAND_FACTOR * band)`; an event whose
structure or arguments differ between the two good runs is unstable and never reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from trainsleuth.tools.trace.align import Pair, align_step
from trainsleuth.tools.trace.traces import ProcTrace

TOLERANCE = 1e-4
BAND_FACTOR = 3.0
VALUE_FIELDS = ("out", "grad", "input")
ARG_FIELDS = ("args", "mode", "calls", "params", "result")
INF = float("inf")


def distance(sa: dict[str, Any] | None, sb: dict[str, Any] | None) -> float:
    """0 for equal summaries, else the largest relative difference (inf for a missing or reshaped one)."""
    if sa is None and sb is None:
        return 0.0
    if sa is None or sb is None:
        return INF
    if "value" in sa or "value" in sb:
        return _rel(sa.get("value"), sb.get("value"))
    if sa.get("n") != sb.get("n") or sa.get("shape") != sb.get("shape"):
        return INF
    if sa.get("nonfinite", 0) != sb.get("nonfinite", 0):
        return INF
    if "error" in sa or "error" in sb:
        return 0.0 if sa == sb else INF
    na, nb = _f(sa.get("norm")), _f(sb.get("norm"))
    if na is None or nb is None:
        return 0.0 if sa == sb else INF
    n = max(int(sa.get("n") or 1), 1)
    scale = max(na, nb)
    rms = scale / math.sqrt(n)
    if scale == 0:
        return 0.0
    d = abs(na - nb) / scale
    for key, ref in (("mean", rms), ("std", rms), ("fp", scale)):
        xa, xb = _f(sa.get(key)), _f(sb.get(key))
        if xa is None or xb is None:
            continue
        d = max(d, abs(xa - xb) / max(ref, 1e-300))
    return d


def _f(x: Any) -> float | None:
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    return None


def _rel(a: Any, b: Any) -> float:
    fa, fb = _f(a), _f(b)
    if fa is None or fb is None:
        return 0.0 if a == b else INF
    if fa == fb:
        return 0.0
    return abs(fa - fb) / max(abs(fa), abs(fb), 1e-300)


def value_distance(ea: dict[str, Any], eb: dict[str, Any]) -> tuple[float, str | None]:
    """The largest distance among an event's summaries, and which one (out, grad, input, delta)."""
    worst, which = 0.0, None
    for key in VALUE_FIELDS:
        if key in ea or key in eb:
            d = distance(ea.get(key), eb.get(key))
            if d > worst:
                worst, which = d, key
    if ea.get("kind") == "param" and (ea.get("delta") is not None or eb.get("delta") is not None):
        d = _rel(ea.get("delta"), eb.get("delta"))
        if d > worst:
            worst, which = d, "delta"
    return worst, which


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def arg_changes(ea: dict[str, Any], eb: dict[str, Any]) -> list[dict[str, Any]]:
    """The arguments (and call attributes: mode, number of calls, parameters) that differ."""
    out: list[dict[str, Any]] = []
    if ea.get("t") != eb.get("t") and ea.get("kind") not in ("param", "buffer", "fwd", "op"):
        out.append({"arg": "target", "a": ea.get("t"), "b": eb.get("t"), "names": True})
    for key in ARG_FIELDS:
        va, vb = ea.get(key), eb.get(key)
        if key == "args" and isinstance(va, dict) and isinstance(vb, dict):
            for name in sorted(set(va) | set(vb), key=lambda n: (len(n), n)):
                if name in va and name in vb and _same(va[name], vb[name]):
                    continue
                if name == "lr" and ea.get("kind") == "param":
                    continue  # the optimizer's learning rate is compared once, at its construction
                out.append({"arg": name, "a": va.get(name, "<not given>"), "b": vb.get(name, "<not given>")})
        elif key == "calls":
            if (va or 1) != (vb or 1):
                out.append({"arg": "calls", "a": va or 1, "b": vb or 1})
        elif not _same(va, vb):
            out.append({"arg": key, "a": va, "b": vb})
    if ea.get("kind") == "param":
        if ea.get("fn") != eb.get("fn"):
            out.append({"arg": "stepped by", "a": ea.get("fn"), "b": eb.get("fn")})
        if bool(ea.get("changed")) != bool(eb.get("changed")):
            out.append({"arg": "updated", "a": bool(ea.get("changed")), "b": bool(eb.get("changed"))})
    return out


@dataclass
class EventDiff:
    """One difference between aligned events of a and b (or an event only one has)."""

    kind: str  # a_only | b_only | reordered | args | update_lost | value
    step: int
    a: dict[str, Any] | None
    b: dict[str, Any] | None
    position: int  # order within the step (a's order)
    changes: list[dict[str, Any]] = field(default_factory=list)
    distance: float | None = None
    band: float | None = None
    field: str | None = None


@dataclass
class StepAlignment:
    step: int
    ea: list[dict[str, Any]]
    eb: list[dict[str, Any]]
    pairs: list[Pair]


def align(pa: ProcTrace, pb: ProcTrace) -> list[StepAlignment]:
    sa, sb = pa.steps(), pb.steps()
    out = []
    for k in sorted(set(sa) | set(sb)):
        ea, eb = sa.get(k, []), sb.get(k, [])
        out.append(StepAlignment(k, ea, eb, align_step(ea, eb)))
    return out


@dataclass
class Noise:
    """The good variant against itself: per event of run a, its distance to the same event of run a'."""

    unstable: set[int] = field(default_factory=set)  # event sequence numbers (of a) that are not reproducible
    event_band: dict[int, float] = field(default_factory=dict)
    kind_band: dict[tuple[str, int], float] = field(default_factory=dict)  # (kind, step) -> running max
    differences: int = 0
    max_distance: float = 0.0

    def band(self, ev: dict[str, Any]) -> float:
        return max(
            self.event_band.get(int(ev["s"]), 0.0), self.kind_band.get((ev["kind"], int(ev["k"])), 0.0)
        )


def measure_noise(pa: ProcTrace, pa2: ProcTrace | None) -> Noise:
    noise = Noise()
    if pa2 is None:
        return noise
    running: dict[str, float] = {}
    for st in align(pa, pa2):
        for p in st.pairs:
            if p.a is None:
                continue
            ea = st.ea[p.a]
            if p.b is None or p.how in ("reordered",) or arg_changes(ea, st.eb[p.b]):
                noise.unstable.add(int(ea["s"]))
                noise.differences += 1
                continue
            d, _ = value_distance(ea, st.eb[p.b])
            if math.isinf(d):
                noise.unstable.add(int(ea["s"]))
                noise.differences += 1
                continue
            if d > 0:
                noise.differences += 1
                noise.max_distance = max(noise.max_distance, d)
            noise.event_band[int(ea["s"])] = d
            running[ea["kind"]] = max(running.get(ea["kind"], 0.0), d)
        for kind, value in running.items():
            noise.kind_band[(kind, st.step)] = value
    return noise


def differences(pa: ProcTrace, pb: ProcTrace, noise: Noise) -> tuple[list[EventDiff], int]:
    """Every difference beyond noise, in order (step, then a's order); and how many values differ within it."""
    found: list[EventDiff] = []
    within = 0
    for st in align(pa, pb):
        for pos, p in enumerate(st.pairs):
            ea = st.ea[p.a] if p.a is not None else None
            eb = st.eb[p.b] if p.b is not None else None
            if ea is not None and int(ea["s"]) in noise.unstable:
                continue
            if ea is None or eb is None:
                found.append(EventDiff("a_only" if eb is None else "b_only", st.step, ea, eb, pos))
                continue
            if p.how == "reordered" and ea.get("kind") not in ("param", "buffer"):
                # (a parameter's record moves when another optimizer steps it, or none: not an order of calls)
                found.append(EventDiff("reordered", st.step, ea, eb, pos))
            if ea.get("kind") == "param" and ea.get("changed") and not eb.get("changed"):
                found.append(EventDiff("update_lost", st.step, ea, eb, pos, changes=arg_changes(ea, eb)))
                continue
            changes = arg_changes(ea, eb)
            if changes:
                found.append(EventDiff("args", st.step, ea, eb, pos, changes=changes))
                continue
            d, which = value_distance(ea, eb)
            if d == 0:
                continue
            band = noise.band(ea)
            if d > max(TOLERANCE, BAND_FACTOR * band):
                found.append(EventDiff("value", st.step, ea, eb, pos, distance=d, band=band, field=which))
            else:
                within += 1
    return found, within

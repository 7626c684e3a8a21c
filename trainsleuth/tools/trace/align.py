"""Align two traces step by step, tolerating a harmless refactor.

Events are matched by what they are, not where they come from: the kind, the API called, the
parameter or module it concerns (a stable name: root index and attribute path, wrappers' prefixes
dropped), the train/eval mode of a forward and, for API calls, the file and function they were
called from (never the line). Within a step the two sequences are aligned like a diff; then, in the
unmatched stretches, events that differ only by their call site (a function renamed or moved) are
paired as "moved", and equal events found at different places of the step as "reordered". What is
left is present in one variant only.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

from trainsleuth.tools.trace.traces import site_key

SITED = {"init", "utils", "mode", "compile", "load", "call", "write", "collective", "optimizer"}


def event_key(ev: dict[str, Any], with_site: bool = True) -> tuple[Any, ...]:
    kind = ev.get("kind")
    if kind == "call" and ev.get("fn") == "forward":
        return (kind, ev.get("t"), ev.get("mode"))
    if kind == "fwd":
        return (kind, ev.get("t"), ev.get("mode"))
    if kind == "op":
        return (kind, ev.get("fn"), ev.get("m"))
    if kind in ("param", "buffer"):
        return (kind, ev.get("t"))
    if kind == "backward":
        return (kind,)
    base: tuple[Any, ...] = (kind, ev.get("fn"), ev.get("t"))
    if with_site and kind in SITED:
        return (*base, site_key(ev.get("site")))
    return base


@dataclass
class Pair:
    a: int | None  # index in the step's events of variant a
    b: int | None
    how: str = "equal"  # equal | moved (another call site) | reordered | a_only | b_only


def align_step(ea: list[dict[str, Any]], eb: list[dict[str, Any]]) -> list[Pair]:
    """The events of one step of a and b, paired, in a's order (b's extra events where b has them)."""
    ka = [event_key(e) for e in ea]
    kb = [event_key(e) for e in eb]
    pairs: list[Pair] = []
    matcher = SequenceMatcher(None, ka, kb, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs.extend(Pair(i1 + d, j1 + d) for d in range(i2 - i1))
            continue
        block_a = [Pair(i, None, "a_only") for i in range(i1, i2)]
        block_b = [Pair(None, j, "b_only") for j in range(j1, j2)]
        _pair_within(block_a, block_b, ea, eb)
        pairs.extend(p for p in _interleave(block_a, block_b) if p.how != "absorbed")
    _pair_reordered(pairs, ka, kb)
    return [p for p in pairs if p.how != "absorbed"]


def call_key(ev: dict[str, Any]) -> tuple[Any, ...] | None:
    """An API call by what was called and from where, whatever its target (compiled a copy, not the model)."""
    if ev.get("kind") not in SITED or ev.get("kind") == "write":
        return None
    where = site_key(ev.get("site"))
    return (ev.get("kind"), ev.get("fn"), where[1] if where else None)


def _pair_within(
    block_a: list[Pair], block_b: list[Pair], ea: list[dict[str, Any]], eb: list[dict[str, Any]]
) -> None:
    """In one unmatched stretch, pair events that are the same call from another site (code moved),
    then the same call from the same place on another target (its arguments differ)."""
    for keyer, how in ((lambda e: event_key(e, with_site=False), "moved"), (call_key, "retargeted")):
        free: dict[tuple[Any, ...], list[Pair]] = {}
        for pb in block_b:
            if pb.how != "b_only" or pb.b is None:
                continue
            key = keyer(eb[pb.b])
            if key is not None:
                free.setdefault(key, []).append(pb)
        for pa in block_a:
            if pa.how != "a_only" or pa.a is None:
                continue
            key = keyer(ea[pa.a])
            candidates = free.get(key) if key is not None else None
            if candidates:
                pb = candidates.pop(0)
                pa.b, pa.how = pb.b, how
                pb.how = "absorbed"


def _interleave(block_a: list[Pair], block_b: list[Pair]) -> list[Pair]:
    return [*block_a, *block_b]


def _pair_reordered(pairs: list[Pair], ka: list[tuple[Any, ...]], kb: list[tuple[Any, ...]]) -> None:
    """Events present in both but at different places of the step: pair them as reordered."""
    free: dict[tuple[Any, ...], list[Pair]] = {}
    for p in pairs:
        if p.how == "b_only" and p.b is not None:
            free.setdefault(kb[p.b], []).append(p)
    if not free:
        return
    for p in pairs:
        if p.how == "a_only" and p.a is not None:
            candidates = free.get(ka[p.a])
            if candidates:
                pb = candidates.pop(0)
                p.b, p.how = pb.b, "reordered"
                pb.how = "absorbed"

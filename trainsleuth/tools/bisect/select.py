"""Choose the next commit to test exactly as `git bisect` does (git's bisect.c), so a bisect
here uses the same candidates, in the same order, and never more runs than `git bisect run`.

Given the candidates (commits reachable from the bad commit and not from any good one, in
`git rev-list` order, newest first) with their parents:

- each candidate's weight is the number of candidates it reaches (itself included);
- without skipped commits the first candidate, walking oldest first, whose weight is about
  half of all is taken at once; otherwise the one with the best `min(weight, all - weight)`;
- with skipped commits all candidates are sorted by that distance (ties: smaller hash first),
  and when the best one is skipped a commit "away" from it is picked with git's own
  pseudo-random rule, so the choice is deterministic and identical to git's.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

PRN_MODULO = 32768


@dataclass
class Choice:
    """The outcome of one selection."""

    commit: str | None  # the commit to test next, or the first bad commit when `found`
    found: bool = False  # `commit` is the first bad commit
    only_skipped_left: list[str] = field(default_factory=list)  # the first bad is one of these
    remaining: int = 0  # candidates left (git's "all")


def _halfway(weight: int, nr: int) -> bool:
    diff = 2 * weight - nr
    if diff in (-1, 0, 1):
        return True
    return abs(diff) < nr // 1024


def _count_distance(start: str, parents: Mapping[str, Sequence[str]], interesting: set[str]) -> int:
    seen = {start}
    stack = [start]
    while stack:
        c = stack.pop()
        for p in parents.get(c, ()):
            if p in interesting and p not in seen:
                seen.add(p)
                stack.append(p)
    return len(seen)


def compute_weights(
    newest_first: Sequence[str], parents: Mapping[str, Sequence[str]], find_all: bool
) -> tuple[dict[str, int], str | None]:
    """git's do_find_bisection: the weights, and the early 'halfway' pick (when not find_all)."""
    order = list(reversed(newest_first))
    nr = len(order)
    interesting = set(order)
    weight: dict[str, int] = {}
    counted = 0
    for c in order:
        n_parents = sum(1 for p in parents.get(c, ()) if p in interesting)
        if n_parents == 0:
            weight[c] = 1
            counted += 1
        else:
            weight[c] = -1 if n_parents == 1 else -2
    for c in order:
        if weight[c] != -2:
            continue
        weight[c] = _count_distance(c, parents, interesting)
        if not find_all and _halfway(weight[c], nr):
            return weight, c
        counted += 1
    while counted < nr:
        progressed = False
        for c in order:
            if weight[c] >= 0:
                continue
            known = next((p for p in parents.get(c, ()) if p in interesting and weight.get(p, -1) >= 0), None)
            if known is None:
                continue
            weight[c] = weight[known] + 1
            counted += 1
            progressed = True
            if not find_all and _halfway(weight[c], nr):
                return weight, c
        if not progressed:  # cannot happen on a real history; never loop forever
            break
    return weight, None


def _get_prn(count: int) -> int:
    value = (count * 1103515245 + 12345) & 0xFFFFFFFF
    return (value // 65536) % PRN_MODULO


def _f32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", x))[0])


def _sqrti(val: int) -> int:
    """git's float (single precision) integer square root."""
    if val == 0:
        return 0
    x = _f32(float(val))
    while True:
        y = _f32(_f32(x + _f32(val / x)) / 2)
        d = _f32(y - x if y > x else x - y)
        x = y
        if d < 0.5:
            break
    return int(x)


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _skip_away(filtered: list[str], bad: str) -> str:
    count = len(filtered)
    prn = _get_prn(count)
    index = _c_div(_c_div(count * prn, PRN_MODULO) * _sqrti(prn), _sqrti(PRN_MODULO))
    previous: str | None = None
    for i, c in enumerate(filtered):
        if i == index:
            if c != bad:
                return c
            return previous if previous is not None else filtered[0]
        previous = c
    return filtered[0]


def choose_next(
    newest_first: Sequence[str],
    parents: Mapping[str, Sequence[str]],
    bad: str,
    skipped: set[str],
) -> Choice:
    """The next step of `git bisect` over these candidates (bad included)."""
    nr = len(newest_first)
    if nr == 0:
        return Choice(commit=None, remaining=0)
    find_all = bool(skipped)
    weight, early = compute_weights(newest_first, parents, find_all)
    if not find_all:
        if early is not None:
            best = early
        else:
            best, best_distance = newest_first[-1], -1
            for c in reversed(newest_first):  # oldest first, as git walks its reversed list
                distance = min(weight[c], nr - weight[c])
                if distance > best_distance:
                    best, best_distance = c, distance
        if best == bad:
            return Choice(commit=bad, found=True, remaining=nr)
        return Choice(commit=best, remaining=nr)
    ranked = sorted(
        newest_first, key=lambda c: (-min(weight[c], nr - weight[c]), bytes.fromhex(c) if _is_hex(c) else c)
    )
    if ranked[0] not in skipped:
        chosen = ranked[0]
        tried: list[str] = []
    else:
        tried = [c for c in ranked if c in skipped]
        filtered = [c for c in ranked if c not in skipped]
        if not filtered:
            return Choice(commit=None, only_skipped_left=tried, remaining=nr)
        chosen = _skip_away(filtered, bad)
    if chosen == bad:
        if tried:
            return Choice(commit=None, only_skipped_left=[*tried, bad], remaining=nr)
        return Choice(commit=bad, found=True, remaining=nr)
    return Choice(commit=chosen, remaining=nr)


def _is_hex(text: str) -> bool:
    try:
        bytes.fromhex(text)
    except ValueError:
        return False
    return True


def estimate_steps(all_count: int) -> int:
    """git's estimate of the bisect steps left after the current one."""
    if all_count < 3:
        return 0
    n = all_count.bit_length() - 1
    e = 1 << n
    x = all_count - e
    return n if e < 3 * x else n - 1

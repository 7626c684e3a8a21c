"""Which metric of one run is which metric of the other, and logs that number steps differently."""

from __future__ import annotations

import re

from trainsleuth.tools.compare.runs import Run
from trainsleuth.tools.compare.summary import ROLE_ORDER

_PREFIX = re.compile(r"^(train(ing)?|trainer|metrics?)[/_.:]", re.I)


def _norm(name: str) -> str:
    base = name.rsplit(":", 1)[-1] if ":" in name else name
    return re.sub(r"[/ .\-]+", "_", _PREFIX.sub("", base.strip().lower()))


def pair_metrics(good: Run, bad: Run, wanted: list[str]) -> list[tuple[str, str]]:
    """(good name, bad name) pairs: same name, then same normalised name, then the only metric of
    a role on both sides."""
    pairs: list[tuple[str, str]] = []
    used_g: set[str] = set()
    bad_names = list(bad.curves)
    for b in bad_names:
        if b in good.curves:
            pairs.append((b, b))
            used_g.add(b)
    rest = [b for b in bad_names if b not in used_g]
    gnorm: dict[str, list[str]] = {}
    for g in good.curves:
        if g not in used_g:
            gnorm.setdefault(_norm(g), []).append(g)
    for b in list(rest):
        cands = gnorm.get(_norm(b), [])
        if len(cands) == 1:
            pairs.append((cands[0], b))
            used_g.add(cands[0])
            rest.remove(b)
            gnorm[_norm(b)] = []
    for b in list(rest):
        role = bad.curves[b].role
        if role in ("other", "loss_component"):
            continue
        g_role = [g for g, c in good.curves.items() if c.role == role and g not in used_g]
        b_role = [x for x in rest if bad.curves[x].role == role]
        if len(g_role) == 1 and len(b_role) == 1:
            pairs.append((g_role[0], b))
            used_g.add(g_role[0])
            rest.remove(b)
    if wanted:
        keep = {w.lower() for w in wanted}
        pairs = [(g, b) for g, b in pairs if {g.lower(), b.lower(), bad.curves[b].role, _norm(b)} & keep]
    return pairs


def align_numbering(good: Run, bad: Run, pairs: list[tuple[str, str]], notes: list[str]) -> None:
    """Logs of one run that number steps differently (epochs from 0 and from 1) are aligned when the
    main metric agrees exactly under a small shift; the shift is applied to every metric and noted."""
    from dataclasses import replace

    from trainsleuth.tools.compare.band import step_shift

    if not pairs:
        return
    order = {r: i for i, r in enumerate(ROLE_ORDER)}
    g, b = min(pairs, key=lambda p: (p[1] not in bad.curves or bad.curves[p[1]].role != "loss",
                                     order.get(bad.curves[p[1]].role, 99)))  # fmt: skip
    shift = step_shift(good.curves[g], bad.curves[b])
    if shift is None:
        return
    for name, c in list(bad.curves.items()):
        bad.curves[name] = replace(
            c,
            steps=[s - shift for s in c.steps],
            first_nonfinite_step=None if c.first_nonfinite_step is None else c.first_nonfinite_step - shift,
        )
    bad.restarts = [r - shift for r in bad.restarts]
    notes.append(
        f"the run under test numbers its steps {shift:+g} from the good run ({b} agrees exactly once shifted, "
        "e.g. epochs counted from 1 instead of 0): aligned by that shift"
    )

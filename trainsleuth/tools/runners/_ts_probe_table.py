"""The per-module table of a probe report: gradient norm, parameter norm, update ratio, activations.

Standard library only (it reads the statistics record, not tensors).
"""

import math

try:
    from ._ts_probe_util import _f, _num
except ImportError:  # the runner's own folder (user's interpreter)
    from _ts_probe_util import _f, _num  # type: ignore[no-redef]


def module_table(stats, limit=200):
    """Per-module rows: grad norm, param norm, update ratio, activation stats (bounded)."""
    steps = max(1, int(stats.get("valid_steps") or 0)) if stats.get("valid_steps") else 0
    acc = {}  # type: dict
    for p in stats.get("params", []):
        mod = p.get("module", "")
        row = acc.setdefault(
            mod,
            {
                "grad_sq": 0.0,
                "param_sq": 0.0,
                "upd": [],
                "numel": 0,
                "trainable": 0,
                "grad": False,
                "none": False,
            },
        )
        row["numel"] += p.get("numel", 0)
        if p.get("requires_grad"):
            row["trainable"] += p.get("numel", 0)
        norms = [_num(x) for x in (p.get("grad_norms") or [])[: steps or None]]
        norms = [x for x in norms if x is not None and math.isfinite(x)]
        if norms:
            row["grad"] = True
            row["grad_sq"] += (sum(norms) / len(norms)) ** 2
        elif p.get("requires_grad"):
            row["none"] = True
        pn = [_num(x) for x in (p.get("param_norms") or [])]
        pn = [x for x in pn if x is not None and math.isfinite(x)]
        if pn:
            row["param_sq"] += pn[0] ** 2
        ur = [_num(x) for x in (p.get("update_ratios") or [])]
        row["upd"] += [x for x in ur if x is not None and math.isfinite(x)]
    mods = {m["name"]: m for m in stats.get("modules", [])}
    rows = []
    for name, r in acc.items():
        m = mods.get(name, {})
        rows.append(
            {
                "module": name or "(model)",
                "type": m.get("type"),
                "order": m.get("order"),
                "params": r["numel"],
                "trainable": r["trainable"],
                "grad_norm": _f(math.sqrt(r["grad_sq"])) if r["grad"] else ("none" if r["none"] else None),
                "param_norm": _f(math.sqrt(r["param_sq"])) if r["param_sq"] else None,
                "update_ratio": _f(sum(r["upd"]) / len(r["upd"])) if r["upd"] else None,
            }
        )
        if m.get("out_rms"):
            rows[-1]["act_rms"] = m["out_rms"]  # output RMS at the first (and last) measured step
    for name, m in mods.items():
        if m.get("act") and name not in acc:
            rows.append(
                {
                    "module": name,
                    "type": m.get("type"),
                    "order": m.get("order"),
                    "dead_fraction": m.get("dead_fraction"),
                    "saturated_fraction": m.get("saturated_fraction"),
                }
            )
    rows.sort(key=lambda r: (r.get("order") is None, r.get("order") or 0))
    return rows[:limit]

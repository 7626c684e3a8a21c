"""Probe rules: dead ReLUs, saturated tanh/sigmoid, un-normalised inputs. Standard library only."""

import math

try:
    from ._ts_probe_util import THRESHOLDS, _f, _num, finding
except ImportError:  # the runner's own folder (user's interpreter)
    from _ts_probe_util import THRESHOLDS, _f, _num, finding  # type: ignore[no-redef]


def activation_rules(stats):
    t = THRESHOLDS
    out = []
    for m in stats.get("modules", []):
        kind = m.get("act")
        if kind == "relu" and m.get("dead_fraction") is not None:
            frac = m["dead_fraction"]
            if frac >= t["dead_warn"] and (m.get("act_obs") or 0) >= t["dead_min_obs"]:
                out.append(
                    finding(
                        "dead_relu",
                        "error" if frac >= t["dead_error"] else "warning",
                        f"{frac:.0%} of the units of {m['name']} never activate on the probed batches "
                        f"(measured over {m.get('act_obs')} observations per unit; reference: at most "
                        f"{t['dead_warn']:.0%}, since a unit that is never positive gets no gradient).",
                        step=0,
                        module=m["name"],
                        evidence={
                            "dead_fraction": _f(frac),
                            "units": m.get("units"),
                            "observations_per_unit": m.get("act_obs"),
                            "threshold": t["dead_warn"],
                        },
                    )
                )
        if kind in ("tanh", "sigmoid") and m.get("saturated_fraction") is not None:
            frac = m["saturated_fraction"]
            if frac >= t["sat_warn"] and (m.get("act_n") or 0) >= t["sat_min_n"]:
                out.append(
                    finding(
                        "saturated_activations",
                        "error" if frac >= t["sat_error"] else "warning",
                        f"{frac:.0%} of the outputs of {m['name']} ({kind}) sit in the flat region, where the gradient is nearly zero.",
                        step=0,
                        module=m["name"],
                        evidence={
                            "saturated_fraction": _f(frac),
                            "kind": kind,
                            "values": m.get("act_n"),
                            "threshold": t["sat_warn"],
                        },
                    )
                )
    return out


def input_rules(stats):
    out = []
    for inp in stats.get("inputs", []):
        r = _num(inp.get("rms"))
        if r is not None and math.isfinite(r) and r > THRESHOLDS["input_rms"]:
            out.append(
                finding(
                    "input_not_normalized",
                    "warning",
                    f"Model input {inp.get('name')} has values of scale {r:.3g} (mean {inp.get('mean')}, "
                    f"std {inp.get('std')}); inputs are usually normalized to about unit scale.",
                    step=0,
                    metric=inp.get("name"),
                    evidence={**inp, "threshold_rms": THRESHOLDS["input_rms"]},
                )
            )
    return out

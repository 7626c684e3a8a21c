"""Gradient-probe rules: statistics in, finding dicts out. Standard library only.

Shared by the standalone runner (user's interpreter), by live mode (`trainsleuth.probe.attach`)
and by the server (`read_probe_run` trends), so it must never import torch or trainsleuth.

Thresholds are deliberately conservative: a false alarm on a healthy model is as bad as a miss.
Every finding carries the threshold it used in `evidence`.
"""

import math
import statistics

THRESHOLDS = {
    # exploding_gradients: global gradient norm of one step
    "explode_warn": 1e3,
    "explode_error": 1e6,
    # exploding_gradients: growth of the global norm step over step (each of the last steps)
    "explode_growth": 5.0,
    # vanishing_gradients: median grad RMS of the earliest quarter of layers / latest quarter
    "vanish_ratio": 1e-4,
    # gradient_imbalance: one module's grad RMS over the median of its peers
    "imbalance_ratio": 100.0,
    # dead_relu: fraction of units never active, and the observations per unit needed to judge
    "dead_warn": 0.6,
    "dead_error": 0.99,
    "dead_min_obs": 16,
    # saturated_activations: fraction of outputs in the flat region
    "sat_warn": 0.6,
    "sat_error": 0.95,
    "sat_min_n": 64,
    # update ratios ||dW|| / ||W|| (weights with >= 2 dims and a non-negligible initial scale)
    "update_high": 0.5,
    "update_low": 1e-5,
    "update_min_rms": 1e-3,
    # loss_component_imbalance: largest / smallest per-term gradient norm on the shared parameters
    "component_ratio": 100.0,
    # loss trend on one fixed batch (loss_not_decreasing needs at least 5 finite steps)
    "loss_min_drop": 0.002,
    "loss_diverge": 1.5,
    # input_not_normalized: root-mean-square of a floating-point model input
    "input_rms": 20.0,
    # a gradient counts as received when its RMS exceeds this fraction of the median param grad RMS
    "grad_floor": 1e-4,
}

MAX_LISTED = 10


def _f(x):
    """JSON-safe float (NaN/Inf as strings)."""
    try:
        x = float(x)
    except Exception:
        return None
    if x != x:
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _num(x):
    """A float from a JSON value that may be 'nan'/'inf'."""
    if x is None:
        return None
    if isinstance(x, str):
        try:
            return float(x)
        except ValueError:
            return None
    try:
        return float(x)
    except Exception:
        return None


def _finite(x):
    x = _num(x)
    return x is not None and math.isfinite(x)


def finding(code, severity, message, step=None, module=None, evidence=None, metric=None):
    return {
        "code": code,
        "severity": severity,
        "message": message,
        "step": step,
        "module": module,
        "metric": metric,
        "evidence": evidence or {},
    }


def _display(module):
    return module if module else "the model's top-level forward"


def highest_modules(flagged, params_by_module):
    """Highest module paths whose (trainable) parameters are all in `flagged` (a set of param names).

    `params_by_module` maps every module path ('' is the root) to its trainable parameter names
    (recursively). Returns module paths, highest first, with no path under another returned one.
    """
    full = [m for m, ps in params_by_module.items() if ps and all(p in flagged for p in ps)]
    full.sort(key=lambda m: (m.count(".") + (1 if m else 0), m))
    out = []  # type: list
    for m in full:
        if any(m == o or (o == "" or m.startswith(o + ".")) for o in out):
            continue
        out.append(m)
    return out


# ---------------------------------------------------------------------------------------------- rules


def analyze(stats):
    """All probe findings for one statistics record (see `_ts_probe_core.Recorder.summary`)."""
    out = []  # type: list
    t = THRESHOLDS
    losses = [_num(x) for x in stats.get("losses", [])]
    valid_steps = stats.get("valid_steps", len(losses))

    # --- non-finite values
    for i, loss in enumerate(losses):
        if loss is not None and not math.isfinite(loss):
            origin = stats.get("forward_origin")
            ev = {"loss": _f(loss), "losses": [_f(x) for x in losses[: i + 1]]}
            if origin is None and stats.get("model_output_finite", {}).get(str(i)) is True:
                ev["created_in"] = "loss function (the model's outputs were finite)"
            out.append(
                finding(
                    "nonfinite_loss",
                    "error",
                    f"The loss is {_f(loss)} at probe step {i}.",
                    step=i,
                    metric="loss",
                    evidence=ev,
                )
            )
            break
    origin = stats.get("forward_origin")
    if origin:
        mod = origin.get("module")
        if origin.get("kind") == "input":
            msg = "The batch itself contains NaN/Inf values before any module runs."
        elif origin.get("kind") == "parent_code":
            msg = (
                f"NaN/Inf first appears in the forward code of {_display(mod)} itself (not in a child), between "
                f"{origin.get('last_finite_child') or 'its start'} and "
                f"{origin.get('first_nonfinite_input_child') or 'its output'}."
            )
        else:
            msg = f"NaN/Inf first appears in the forward pass at {_display(mod)} ({origin.get('type')}): its inputs were finite, its output is not."
        ev = {k: v for k, v in origin.items() if k not in ("module", "step")}
        out.append(
            finding(
                "nonfinite_forward", "error", msg, step=origin.get("step"), module=mod or None, evidence=ev
            )
        )
    borigin = stats.get("backward_origin")
    if borigin and not origin:
        mod = borigin.get("module")
        if borigin.get("kind") == "loss":
            msg = (
                "Forward and loss are finite but the backward pass of the loss function creates NaN/Inf "
                "gradients"
                + (f"; the first module they reach is {mod} ({borigin.get('type')})." if mod else ".")
            )
        else:
            msg = f"Forward and loss are finite but the backward pass creates NaN/Inf gradients, first at {_display(mod)}."
        ev = {k: v for k, v in borigin.items() if k not in ("module", "step")}
        out.append(
            finding("nonfinite_gradient", "error", msg, step=borigin.get("step"), module=mod, evidence=ev)
        )

    params = stats.get("params", [])
    modules = stats.get("modules", [])
    owner_type = {m["name"]: m.get("type") for m in modules}
    trainable = [p for p in params if p.get("requires_grad")]
    grad_steps = max(0, int(valid_steps))

    # --- grad_not_zeroed (meaningful even when later steps went non-finite)
    stale = [p for p in trainable if p.get("stale_steps")]
    if stale:
        first = min(min(p["stale_steps"]) for p in stale)
        out.append(
            finding(
                "grad_not_zeroed",
                "error",
                f"Gradients from an earlier step were still present when a new backward started "
                f"({len(stale)} of {len(trainable)} trainable parameters), so they accumulate across steps.",
                step=first,
                module=None,
                evidence={
                    "params": [p["name"] for p in stale[:MAX_LISTED]],
                    "n_params": len(stale),
                    "hint": "call optimizer.zero_grad() (or model.zero_grad()) once per step before backward",
                },
            )
        )

    if grad_steps <= 0:
        out.extend(_activation_rules(stats))
        return out

    # per-param gradient RMS averaged over valid steps
    def grms(p):
        norms = [_num(x) for x in (p.get("grad_norms") or [])[:grad_steps]]
        norms = [x for x in norms if x is not None and math.isfinite(x)]
        if not norms or not p.get("numel"):
            return 0.0
        return statistics.median(norms) / math.sqrt(p["numel"])

    rms = {p["name"]: grms(p) for p in trainable}
    positive = [v for v in rms.values() if v > 0]
    floor = (statistics.median(positive) * t["grad_floor"]) if positive else 0.0
    top_rms = max(positive) if positive else 0.0

    # --- no_gradient
    pbm = stats.get("params_by_module", {})
    lacking = set()
    reason = {}
    for p in trainable:
        none = p.get("none_steps", 0)
        zero = p.get("zero_steps", 0)
        if none + zero >= grad_steps:
            lacking.add(p["name"])
            reason[p["name"]] = "none" if none >= grad_steps else "zero"
    if lacking:
        called = {m["name"]: m.get("calls", 0) for m in modules}
        for mod in highest_modules(lacking, pbm)[:MAX_LISTED]:
            names = pbm.get(mod, [])
            kinds = sorted({reason[n] for n in names if n in reason})
            never_called = called.get(mod, 0) == 0 and mod != ""
            if never_called:
                why = "it was never called in the forward pass (an unused branch)"
            elif kinds == ["zero"]:
                why = "their gradients are exactly zero"
            else:
                why = "no gradient reaches them (a detached path, a no_grad block or an output that is not used)"
            out.append(
                finding(
                    "no_gradient",
                    "warning",
                    f"Parameters of {_display(mod)} require grad but get none: {why}.",
                    step=0,
                    module=mod or None,
                    evidence={
                        "params": names[:MAX_LISTED],
                        "n_params": len(names),
                        "gradient": kinds,
                        "module_called": not never_called,
                        "type": owner_type.get(mod),
                    },
                )
            )

    # --- params_not_updated
    if stats.get("updates_measured") and grad_steps >= 1:
        stuck = set()
        info = {}
        for p in trainable:
            got = [
                i
                for i, x in enumerate((p.get("grad_norms") or [])[:grad_steps])
                if _finite(x) and _num(x) > 0 and (_num(x) / math.sqrt(max(1, p.get("numel", 1)))) > floor
            ]
            changed = p.get("changed_steps") or []
            in_opt = p.get("in_optimizer", True) is not False
            lr_zero = _num(p.get("lr")) == 0
            if in_opt and not lr_zero and rms.get(p["name"], 0.0) < top_rms * 1e-3:
                continue  # a vanishing gradient can underflow the update; vanishing_gradients covers it
            if got and not changed and (grad_steps >= 2 or not p.get("in_optimizer", True)):
                stuck.add(p["name"])
                info[p["name"]] = {"in_optimizer": p.get("in_optimizer"), "lr": p.get("lr")}
        if stuck:
            with_grad = {m: [n for n in ps if n in rms and rms[n] > floor] for m, ps in pbm.items()}
            groups = [(mod, with_grad.get(mod, []), []) for mod in highest_modules(stuck, with_grad)]  # type: list
            covered = {n for _, names, _ in groups for n in names}
            # parameters stuck for a definite reason (missing from the optimizer, lr 0) whose module
            # also holds parameters that do move: compared per parameter, reported under their module
            partial = {}  # type: dict
            for p in trainable:
                n = p["name"]
                if (
                    n in stuck
                    and n not in covered
                    and (info[n]["in_optimizer"] is False or _num(info[n]["lr"]) == 0)
                ):
                    partial.setdefault(p.get("module", ""), []).append(n)
            for mod, names in partial.items():
                moved = [n for n in with_grad.get(mod, []) if n not in stuck]
                groups.append((mod, names, moved))
            for mod, names, moved in groups[:MAX_LISTED]:
                missing = [n for n in names if info.get(n, {}).get("in_optimizer") is False]
                lrs = sorted({info[n]["lr"] for n in names if n in info and info[n].get("lr") is not None})
                if missing:
                    why = "they are missing from the optimizer's parameter groups"
                elif lrs and all(x == 0 for x in lrs):
                    why = "their learning rate is 0"
                else:
                    why = "the optimizer step leaves them unchanged"
                ev = {
                    "params": names[:MAX_LISTED],
                    "n_params": len(names),
                    "in_optimizer": not missing,
                    "learning_rates": lrs,
                    "steps": grad_steps,
                }
                what = f"Parameters of {_display(mod)}"
                if moved:
                    ev["updated_params"] = moved[:MAX_LISTED]
                    short = ", ".join(n.rpartition(".")[2] for n in names[:MAX_LISTED])
                    what = f"Parameter(s) {short} of {_display(mod)} ({owner_type.get(mod)})"
                out.append(
                    finding(
                        "params_not_updated",
                        "error",
                        f"{what} receive gradients but are never changed by the optimizer step: {why}.",
                        step=0,
                        module=mod or None,
                        evidence=ev,
                    )
                )

    # --- update ratios
    if stats.get("updates_measured"):
        ratios = []
        for p in trainable:
            if p.get("ndim", 0) < 2 or (p.get("init_rms") or 0) < t["update_min_rms"]:
                continue
            rs = [_num(x) for x in (p.get("update_ratios") or [])[:grad_steps]]
            rs = [x for x in rs if x is not None and math.isfinite(x)]
            if rs and any(x > 0 for x in rs):
                ratios.append((sum(rs) / len(rs), p))
        if ratios:
            worst = max(ratios, key=lambda r: r[0])
            high = [r for r in ratios if r[0] > t["update_high"]]
            if high:
                out.append(
                    finding(
                        "update_ratio_high",
                        "warning",
                        f"Each optimizer step changes weights by {worst[0]:.3g} of their size (||dW||/||W||; "
                        f"usual is about 1e-3): the learning rate is likely far too high.",
                        step=0,
                        module=worst[1].get("module") or None,
                        evidence={
                            "worst_param": worst[1]["name"],
                            "worst_ratio": _f(worst[0]),
                            "n_params_above": len(high),
                            "threshold": t["update_high"],
                            "examples": {
                                r[1]["name"]: _f(r[0]) for r in sorted(high, key=lambda r: -r[0])[:MAX_LISTED]
                            },
                        },
                    )
                )
            med = statistics.median(r[0] for r in ratios)
            if 0 < med < t["update_low"]:
                out.append(
                    finding(
                        "update_ratio_low",
                        "warning",
                        f"Optimizer steps change weights by a median {med:.3g} of their size (||dW||/||W||; "
                        "usual is about 1e-3): the learning rate is likely far too low.",
                        step=0,
                        module=None,
                        evidence={
                            "median_ratio": _f(med),
                            "threshold": t["update_low"],
                            "n_weights": len(ratios),
                        },
                    )
                )

    # --- gradient magnitudes
    gnorms = [_num(x) for x in stats.get("global_grad_norms", [])[:grad_steps]]
    gnorms = [x for x in gnorms if x is not None and math.isfinite(x)]
    biggest_param = max(
        trainable,
        key=lambda p: max([_num(x) or 0 for x in (p.get("grad_norms") or [0])[:grad_steps]] + [0]),
        default=None,
    )
    if gnorms:
        peak = max(gnorms)
        growth = None
        if len(gnorms) >= 3 and all(
            gnorms[i] > 0 and gnorms[i + 1] / gnorms[i] >= t["explode_growth"]
            for i in range(len(gnorms) - 3, len(gnorms) - 1)
        ):
            growth = gnorms[-1] / gnorms[-3]
        if peak > t["explode_warn"] or growth:
            sev = "error" if peak > t["explode_error"] else "warning"
            msg = (
                f"The global gradient norm reaches {peak:.3g}"
                + (f" and grows {growth:.3g}x over the last steps" if growth else "")
                + "."
            )
            out.append(
                finding(
                    "exploding_gradients",
                    sev,
                    msg,
                    step=gnorms.index(peak),
                    module=(biggest_param or {}).get("module") or None,
                    evidence={
                        "global_grad_norms": [_f(x) for x in gnorms],
                        "threshold": t["explode_warn"],
                        "largest_param": (biggest_param or {}).get("name"),
                        "growth": _f(growth) if growth else None,
                    },
                )
            )

    # layers in forward order (weights only, embeddings excluded: their gradients are sparse by design)
    layer_rms = layer_grad_rms(stats)
    if len(layer_rms) >= 4:
        q = max(1, len(layer_rms) // 4)
        early = [v for _, v in layer_rms[:q]]
        late = [v for _, v in layer_rms[-q:]]
        me, ml = statistics.median(early), statistics.median(late)
        if ml > 0 and me / ml < t["vanish_ratio"]:
            out.append(
                finding(
                    "vanishing_gradients",
                    "warning",
                    f"Early layers receive gradients {ml / max(me, 1e-300):.3g}x smaller than late layers.",
                    step=0,
                    module=layer_rms[0][0] or None,
                    evidence={
                        "early_layers": {n: _f(v) for n, v in layer_rms[:q]},
                        "late_layers": {n: _f(v) for n, v in layer_rms[-q:]},
                        "ratio": _f(me / ml),
                        "threshold": t["vanish_ratio"],
                    },
                )
            )
    mod_rms = module_grad_rms(stats)
    if len(mod_rms) >= 3:
        top_name, top = max(mod_rms.items(), key=lambda kv: kv[1])
        peers = [v for k, v in mod_rms.items() if k != top_name]
        med = statistics.median(peers)
        if med > 0 and top / med >= t["imbalance_ratio"]:
            out.append(
                finding(
                    "gradient_imbalance",
                    "warning",
                    f"Gradients of {_display(top_name)} are {top / med:.3g}x larger than the median of the other modules.",
                    step=0,
                    module=top_name or None,
                    evidence={
                        "grad_rms": _f(top),
                        "peer_median_grad_rms": _f(med),
                        "ratio": _f(top / med),
                        "threshold": t["imbalance_ratio"],
                    },
                )
            )

    # --- loss components
    terms = stats.get("term_grad_norms") or {}
    vals = {k: _num(v) for k, v in terms.items() if _finite(v) and _num(v) > 0}
    if len(vals) >= 2:
        hi = max(vals, key=lambda k: vals[k])
        lo = min(vals, key=lambda k: vals[k])
        if vals[hi] / vals[lo] >= t["component_ratio"]:
            out.append(
                finding(
                    "loss_component_imbalance",
                    "warning",
                    f"The loss term {hi!r} sends {vals[hi] / vals[lo]:.3g}x more gradient into the shared parameters "
                    f"than {lo!r}: the loss weighting lets one term dominate.",
                    step=0,
                    metric=hi,
                    evidence={
                        "term_grad_norms": {k: _f(v) for k, v in terms.items()},
                        "shared_params": stats.get("shared_params"),
                        "threshold": t["component_ratio"],
                    },
                )
            )

    # --- loss trend on one fixed batch
    if stats.get("updates_measured") or stats.get("mode") == "step_fn":
        out.extend(loss_trend(losses[:grad_steps], fixed_batch=stats.get("fixed_batch", True)))

    # --- inputs
    for inp in stats.get("inputs", []):
        r = _num(inp.get("rms"))
        if r is not None and math.isfinite(r) and r > t["input_rms"]:
            out.append(
                finding(
                    "input_not_normalized",
                    "warning",
                    f"Model input {inp.get('name')} has values of scale {r:.3g} (mean {inp.get('mean')}, "
                    f"std {inp.get('std')}); inputs are usually normalized to about unit scale.",
                    step=0,
                    metric=inp.get("name"),
                    evidence={**inp, "threshold_rms": t["input_rms"]},
                )
            )

    out.extend(_activation_rules(stats))
    return out


def _activation_rules(stats):
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
                        f"{frac:.0%} of the units of {m['name']} never activate on the probed batches.",
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


def layer_grad_rms(stats):
    """[(module, grad RMS of its weights)] in forward order, embeddings and 1-d params excluded."""
    order = {m["name"]: m.get("order") for m in stats.get("modules", [])}
    mtype = {m["name"]: m.get("type") for m in stats.get("modules", [])}
    steps = max(1, int(stats.get("valid_steps", 1)))
    acc = {}  # type: dict
    for p in stats.get("params", []):
        if not p.get("requires_grad") or p.get("ndim", 0) < 2:
            continue
        mod = p.get("module", "")
        if mtype.get(mod) in ("Embedding", "EmbeddingBag") or order.get(mod) is None:
            continue
        norms = [_num(x) for x in (p.get("grad_norms") or [])[:steps]]
        norms = [x for x in norms if x is not None and math.isfinite(x)]
        if not norms:
            continue
        sq, n = acc.get(mod, (0.0, 0))
        acc[mod] = (sq + statistics.median(norms) ** 2, n + p["numel"])
    rows = [(m, math.sqrt(sq / n)) for m, (sq, n) in acc.items() if n and sq > 0]
    rows.sort(key=lambda r: order.get(r[0]) or 0)
    return rows


def module_grad_rms(stats):
    """{module: grad RMS over its direct trainable params that receive gradients} (embeddings excluded)."""
    mtype = {m["name"]: m.get("type") for m in stats.get("modules", [])}
    steps = max(1, int(stats.get("valid_steps", 1)))
    acc = {}  # type: dict
    for p in stats.get("params", []):
        if not p.get("requires_grad"):
            continue
        mod = p.get("module", "")
        if mtype.get(mod) in ("Embedding", "EmbeddingBag"):
            continue
        norms = [_num(x) for x in (p.get("grad_norms") or [])[:steps]]
        norms = [x for x in norms if x is not None and math.isfinite(x)]
        if not norms:
            continue
        sq, n = acc.get(mod, (0.0, 0))
        acc[mod] = (sq + statistics.median(norms) ** 2, n + p["numel"])
    return {m: math.sqrt(sq / n) for m, (sq, n) in acc.items() if n and sq > 0}


def loss_trend(losses, fixed_batch=True, step_offset=0, steps=None):
    """loss_not_decreasing / loss_diverging from a loss series (finite prefix only)."""
    t = THRESHOLDS
    vals = []
    for x in losses:
        x = _num(x)
        if x is None or not math.isfinite(x):
            break
        vals.append(x)
    steps = steps or list(range(step_offset, step_offset + len(vals)))
    if len(vals) < 3:
        return []
    first, last = vals[0], vals[-1]
    if fixed_batch:
        rising = last > first * t["loss_diverge"] and first > 0 and last >= max(vals) * 0.999
        window_first, window_last = first, last
    else:
        k = max(1, len(vals) // 3)
        window_first = sum(vals[:k]) / k
        window_last = sum(vals[-k:]) / k
        rising = window_first > 0 and window_last > window_first * t["loss_diverge"]
    if rising:
        return [
            finding(
                "loss_diverging",
                "error",
                f"The loss rises from {window_first:.4g} to {window_last:.4g} across probe steps.",
                step=steps[0],
                metric="loss",
                evidence={
                    "losses": [_f(x) for x in vals[:50]],
                    "threshold_ratio": t["loss_diverge"],
                    "fixed_batch": fixed_batch,
                },
            )
        ]
    if fixed_batch and abs(first) > 1e-6 and len(vals) >= 5:
        best = min(vals[1:])
        if best > first - t["loss_min_drop"] * abs(first):
            return [
                finding(
                    "loss_not_decreasing",
                    "warning",
                    f"{len(vals)} steps on one fixed batch do not bring the loss down (from {first:.4g}, best "
                    f"{best:.4g}): the model cannot even overfit one batch.",
                    step=steps[0],
                    metric="loss",
                    evidence={"losses": [_f(x) for x in vals[:50]], "min_relative_drop": t["loss_min_drop"]},
                )
            ]
    return []

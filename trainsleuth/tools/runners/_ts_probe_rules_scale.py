"""Probe rules on gradient and update scale, all relative: exploding, vanishing, imbalance, learning rate.

Each tensor is judged against its own size (gradient RMS over weight RMS, ||dW||/||W||), against its
peers (the same role in repeated blocks: `encoder.layer.*.attention.self.query`), and against the
learning rate the schedule will reach (`initial_lr`), never against fixed absolute norms: a freshly
initialised or zero-initialised head, a depthwise convolution or a large model is not an anomaly.
Weights directly followed by batch or group norm are scale-invariant (their size does not change
the output), so their update ratios say nothing about the learning rate and are left out.
Standard library only.
"""

import math
import re
import statistics

try:
    from ._ts_probe_util import MAX_LISTED, THRESHOLDS, _f, _num, display, finding
except ImportError:  # the runner's own folder (user's interpreter)
    from _ts_probe_util import MAX_LISTED, THRESHOLDS, _f, _num, display, finding  # type: ignore[no-redef]

EMBEDDINGS = ("Embedding", "EmbeddingBag")
NORM_AFTER = (
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "SyncBatchNorm",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
)
PASS_THROUGH = ("Identity", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d")
_DIGITS = re.compile(r"(?<=\.)\d+(?=\.)|^\d+(?=\.)")


def role_key(name):
    """The parameter's role in repeated blocks: numeric path parts replaced by '*'."""
    return _DIGITS.sub("*", name)


def grad_rms(p, steps):
    norms = [_num(x) for x in (p.get("grad_norms") or [])[:steps]]
    norms = [x for x in norms if x is not None and math.isfinite(x)]
    if not norms or not p.get("numel"):
        return None
    return statistics.median(norms) / math.sqrt(p["numel"])


def weight_rms(p):
    n = _num(p.get("init_norm"))
    if n is None or not p.get("numel"):
        return None
    return n / math.sqrt(p["numel"])


def scale_invariant_modules(stats):
    """Modules whose output goes straight into batch/group norm (next module in forward order)."""
    mods = [m for m in stats.get("modules", []) if m.get("order") is not None]
    mods.sort(key=lambda m: m["order"])
    out = set()
    for i, m in enumerate(mods):
        j = i + 1
        while j < len(mods) and mods[j].get("type") in PASS_THROUGH:
            j += 1
        if j < len(mods) and mods[j].get("type") in NORM_AFTER:
            out.add(m["name"])
    return out


def _weights(stats, steps):
    """(param, grad rms, weight rms, relative gradient) for weights with >= 2 dims outside embeddings."""
    mtype = {m["name"]: m.get("type") for m in stats.get("modules", [])}
    rows = []
    for p in stats.get("params", []):
        if not p.get("requires_grad") or p.get("ndim", 0) < 2 or mtype.get(p.get("module", "")) in EMBEDDINGS:
            continue
        g = grad_rms(p, steps)
        w = weight_rms(p)
        if g is None:
            continue
        rel = g / w if w and w >= THRESHOLDS["min_init_rms"] else None
        rows.append((p, g, w, rel))
    return rows


def depth_groups(stats, steps):
    """{role: [(order, module, relative gradient)]} for roles repeated in >= 3 blocks, in forward order."""
    order = {m["name"]: m.get("order") for m in stats.get("modules", [])}
    groups = {}  # type: dict
    for p, _g, _w, rel in _weights(stats, steps):
        mod = p.get("module", "")
        if rel is None or rel <= 0 or order.get(mod) is None:
            continue
        groups.setdefault(role_key(p["name"]), []).append((order[mod], mod, rel))
    out = {}
    for role, rows in groups.items():
        if len({r[1] for r in rows}) >= 3:
            out[role] = sorted(rows)
    return out


def _depth_ratio(rows):
    q = max(1, len(rows) // 4)
    early = statistics.median(r[2] for r in rows[:q])
    late = statistics.median(r[2] for r in rows[-q:])
    return early, late


def gradient_scale_rules(stats, steps):
    t = THRESHOLDS
    out = []
    # --- growth over the probe's steps (relative to the step before)
    gnorms = [_num(x) for x in stats.get("global_grad_norms", [])[:steps]]
    gnorms = [x for x in gnorms if x is not None and math.isfinite(x)]
    growth = None
    if len(gnorms) >= 3 and all(
        gnorms[i] > 0 and gnorms[i + 1] / gnorms[i] >= t["explode_growth"]
        for i in range(len(gnorms) - 3, len(gnorms) - 1)
    ):
        growth = gnorms[-1] / gnorms[-3]
    # --- relative to each weight's own size
    invariant = scale_invariant_modules(stats)
    rows = [r for r in _weights(stats, steps) if r[3] is not None and r[0].get("module") not in invariant]
    worst = max(rows, key=lambda r: r[3], default=None)
    # relative to its peers too: a loss summed over a batch and every pixel makes every weight's relative
    # gradient large (a VAE's heads a little more); an explosion stands out, or is everywhere
    peers = sorted(r[3] for r in rows if r is not worst)
    peer_med = statistics.median(peers) if peers else None
    rel_bad = (
        worst is not None
        and worst[3] >= t["explode_relative"]
        and (
            peer_med is None
            or worst[3] >= t["explode_peer_ratio"] * peer_med
            or peer_med >= t["explode_relative"]
        )
    )
    # --- through depth, within groups of repeated blocks
    vanish = explode_depth = None
    for role, grp in depth_groups(stats, steps).items():
        early, late = _depth_ratio(grp)
        if (
            late > 0
            and early / late >= t["depth_ratio"]
            and (explode_depth is None or early / late > explode_depth[1])
        ):
            explode_depth = (role, early / late, grp)
        if early > 0 and late / early >= t["depth_ratio"] and (vanish is None or late / early > vanish[1]):
            vanish = (role, late / early, grp)
    if growth or rel_bad or explode_depth:
        parts = []
        ev = {"global_grad_norms": [_f(x) for x in gnorms[:50]]}  # type: dict
        module = None
        if rel_bad and worst is not None:
            p, g, w, rel = worst
            module = p.get("module") or None
            parts.append(
                f"{p['name']} has a gradient RMS {rel:.3g}x its own weight RMS ({g:.3g} vs {w:.3g}; "
                f"reference: below {t['explode_relative']:g}x, else one SGD step at lr 1e-3 moves it by more than its size)"
            )
            ev.update(
                {
                    "param": p["name"],
                    "grad_rms": _f(g),
                    "weight_rms": _f(w),
                    "relative": _f(rel),
                    "threshold_relative": t["explode_relative"],
                    "peer_median_relative": _f(peer_med) if peer_med is not None else None,
                    "threshold_peer_ratio": t["explode_peer_ratio"],
                }
            )
        if explode_depth:
            role, ratio, grp = explode_depth
            module = module or grp[0][1]
            parts.append(
                f"gradients grow {ratio:.3g}x from the last to the first of the repeated {role} layers"
            )
            ev.update(
                {
                    "role": role,
                    "depth_ratio": _f(ratio),
                    "threshold_depth": t["depth_ratio"],
                    "layers": {m: _f(r) for _, m, r in grp[:MAX_LISTED]},
                }
            )
        if growth:
            parts.append(f"the global gradient norm grows {growth:.3g}x over the last two steps")
            ev.update({"growth": _f(growth), "threshold_growth_per_step": t["explode_growth"]})
        out.append(
            finding(
                "exploding_gradients",
                "error"
                if (rel_bad and worst is not None and worst[3] >= 1e3 * t["explode_relative"])
                else "warning",
                "Gradients explode: " + "; ".join(parts) + ".",
                step=gnorms.index(max(gnorms)) if gnorms else 0,
                module=module,
                evidence=ev,
            )
        )
    if vanish:
        role, ratio, grp = vanish
        q = max(1, len(grp) // 4)
        out.append(
            finding(
                "vanishing_gradients",
                "warning",
                f"Early layers receive gradients {ratio:.3g}x smaller (relative to their weights) than late layers "
                f"of the same role ({role}, {len(grp)} repeated blocks; reference: the same role's late layers, "
                f"threshold {t['depth_ratio']:g}x).",
                step=0,
                module=grp[0][1] or None,
                evidence={
                    "role": role,
                    "early_layers": {m: _f(r) for _, m, r in grp[:q]},
                    "late_layers": {m: _f(r) for _, m, r in grp[-q:]},
                    "ratio": _f(1 / ratio),
                    "threshold": 1 / t["depth_ratio"],
                    "measure": "gradient RMS / weight RMS",
                },
            )
        )
    out.extend(imbalance_rules(stats, steps))
    return out


def imbalance_rules(stats, steps):
    """A module with >= 100x its peers' gradient RMS, and a cause that makes it an anomaly: an input
    of much larger scale than other modules' inputs, or a parameter stored at a scale its gradient
    dwarfs (relative gradient >= 1e4x the median and >= 1e3 in absolute terms). Heads near the loss
    are large by position alone, and blocks behind a tiny layer scale (ConvNeXt) small by design."""
    t = THRESHOLDS
    mtype = {m["name"]: m.get("type") for m in stats.get("modules", [])}
    in_rms = {
        m["name"]: m.get("input_rms") for m in stats.get("modules", []) if m.get("input_rms") is not None
    }
    acc = {}  # type: dict
    rels = {}  # type: dict
    for p in stats.get("params", []):
        if not p.get("requires_grad") or mtype.get(p.get("module", "")) in EMBEDDINGS:
            continue
        g = grad_rms(p, steps)
        if not g:
            continue
        mod = p.get("module", "")
        sq, n = acc.get(mod, (0.0, 0))
        acc[mod] = (sq + g * g * p["numel"], n + p["numel"])
        w = weight_rms(p)
        # a bias is an offset, not a scale it is stored at (an output bias near 0 has a huge "relative" gradient)
        if w and w >= t["min_init_rms"] and p["name"].rpartition(".")[2] != "bias":
            rels.setdefault(mod, []).append(g / w)
    mod_rms = {m: math.sqrt(sq / n) for m, (sq, n) in acc.items() if n and sq > 0}
    if len(mod_rms) < 3:
        return []
    top_name, top = max(mod_rms.items(), key=lambda kv: kv[1])
    peers = [v for k, v in mod_rms.items() if k != top_name]
    med = statistics.median(peers)
    if med <= 0 or top / med < t["imbalance_ratio"]:
        return []
    ev = {
        "grad_rms": _f(top),
        "peer_median_grad_rms": _f(med),
        "ratio": _f(top / med),
        "threshold": t["imbalance_ratio"],
    }
    cause = None
    peer_in = [v for k, v in in_rms.items() if k != top_name and k in mod_rms and v]
    if in_rms.get(top_name) and peer_in:
        ratio_in = in_rms[top_name] / statistics.median(peer_in)
        ev.update(
            {"input_rms": _f(in_rms[top_name]), "peer_median_input_rms": _f(statistics.median(peer_in))}
        )
        if ratio_in >= t["imbalance_input_ratio"]:
            cause = f"its input has RMS {in_rms[top_name]:.3g}, {ratio_in:.3g}x the other modules' inputs (un-normalised features)"
    top_rel = max(rels.get(top_name, []), default=None)
    peer_rel = [r for k, v in rels.items() if k != top_name for r in v]
    if cause is None and top_rel and peer_rel:
        ratio_rel = top_rel / statistics.median(peer_rel)
        ev.update(
            {
                "relative_gradient": _f(top_rel),
                "peer_median_relative_gradient": _f(statistics.median(peer_rel)),
            }
        )
        if ratio_rel >= t["imbalance_relative"] and top_rel >= t["explode_relative"]:
            cause = (
                f"relative to its own size its gradient is {ratio_rel:.3g}x the median (a parameter stored at a "
                "different scale than it is used)"
            )
    if cause is None:
        return []
    ev["cause"] = cause
    ev["params"] = [
        p["name"]
        for p in stats.get("params", [])
        if p.get("module", "") == top_name and p.get("requires_grad")
    ][:MAX_LISTED]
    return [
        finding(
            "gradient_imbalance",
            "warning",
            f"Gradients of {display(top_name)} are {top / med:.3g}x larger than the median of the other modules: {cause}.",
            step=0,
            module=top_name or None,
            evidence=ev,
        )
    ]


def _loss_improves(losses):
    vals = []
    for x in losses:
        x = _num(x)
        if x is None or not math.isfinite(x):
            return False
        vals.append(x)
    if len(vals) < 2:
        return True
    return vals[-1] < vals[0] and max(vals) <= vals[0] * THRESHOLDS["loss_diverge"]


ACCUMULATING = ("Adagrad", "Adadelta")


def step_rules(stats):
    """{param: its optimizer's step rule} where the usual band does not apply: "closure" (a line search
    picks the step), "accumulating" (Adagrad/Adadelta: sign-like first steps that then shrink), "sparse"
    (rows of a table move only when their ids appear)."""
    obs = stats.get("regime_obs") or {}
    opts = {o["index"]: o for o in obs.get("optimizers", [])}
    out = {}
    for name, idx in (obs.get("param_optimizers") or {}).items():
        for i in idx:
            o = opts.get(i) or {}
            if o.get("closure_steps") or o.get("type") == "LBFGS":
                out[name] = "closure"
            elif o.get("type") in ACCUMULATING:
                out.setdefault(name, "accumulating")
    for name in obs.get("sparse_grads") or []:
        out[name] = "sparse"
    return out


def update_rules(stats, steps, losses):
    """Learning rate too high / too low from ||dW||/||W|| per weight, scaled to the schedule's peak lr,
    judged against each optimizer's own step rule and the regime (`_ts_probe_regimes`)."""
    if not stats.get("updates_measured") or stats.get("update_ratio_rules") is False:
        return []
    t = THRESHOLDS
    regimes = {r["name"] for r in stats.get("regimes") or []}
    if "linear_model" in regimes:
        return []  # the weights start far from their solution's scale; a too-large step shows in the loss
    rule = step_rules(stats)
    # non-stationary objectives: no fixed-batch loss can show instability, so only a rewrite of half a
    # weight per step (which no optimizer survives) is called too high
    median_high = t["update_high"] if regimes & {"adversarial", "rl"} else t["update_median_high"]
    first_steps = []
    invariant = scale_invariant_modules(stats)
    step_lrs = stats.get("step_lrs") or []
    peaks = stats.get("peak_lrs") or []
    ratios = []
    raw_ratios = []  # the same, at the learning rate each step used
    scaled_any = False
    for p in stats.get("params", []):
        if (
            not p.get("requires_grad")
            or p.get("ndim", 0) < 2
            or (p.get("init_rms") or 0) < t["update_min_rms"]
        ):
            continue
        if p.get("module") in invariant or p.get("in_optimizer") is False:
            continue
        kind = rule.get(p["name"])
        if kind in ("closure", "sparse"):
            continue
        if kind == "accumulating":  # its first step moves each weight by about lr: that is its whole rule
            first = next((_num(x) for x in (p.get("update_ratios") or []) if _num(x)), None)
            if first:
                first_steps.append((first, p))
            continue
        gi = p.get("group")
        vals = []
        raw = []
        for k, x in enumerate((p.get("update_ratios") or [])[:steps]):
            x = _num(x)
            if x is None or not math.isfinite(x) or x <= 0:
                continue
            raw.append(x)
            lrs = step_lrs[k] if k < len(step_lrs) else None
            if gi is not None and lrs and gi < len(lrs) and gi < len(peaks):
                used, peak = _num(lrs[gi]), _num(peaks[gi])
                if used and peak and peak > used:
                    x *= peak / used
                    scaled_any = True
            vals.append(x)
        if vals:
            ratios.append((sum(vals) / len(vals), p))
            raw_ratios.append(sum(raw) / len(raw))
    improves = _loss_improves(losses[:steps])
    if first_steps:  # Adagrad/Adadelta: too high when the first step rewrites the weight whole
        med_first = statistics.median(r[0] for r in first_steps)
        if med_first > 1.0 or (not improves and med_first > t["update_high"]):
            ratios += first_steps
    if not ratios:
        return []
    out = []
    med = statistics.median(r[0] for r in ratios)
    worst = max(ratios, key=lambda r: r[0])
    high = [r for r in ratios if r[0] > t["update_high"]]
    ref = "about 1e-3 is usual; published tools flag outside 1e-4..1e-1"
    judge_loss = not regimes & {"adversarial", "rl"}
    too_high = med > median_high
    if too_high and scaled_any and improves and raw_ratios and med <= t["update_high"]:
        # above the band only when projected to a peak lr the schedule has not reached yet (a warmup),
        # while the loss improves at the rates used: an adaptive optimizer's first steps move each weight
        # by about lr, more than it will later, so the projection alone is not evidence
        too_high = statistics.median(raw_ratios) > median_high
    if too_high or (high and not improves and judge_loss):
        why = (
            f"the median weight changes by {med:.3g} of its size per step"
            if too_high
            else f"{len(high)} weight(s) change by more than {t['update_high']} of their size per step while the loss does not improve"
        )
        out.append(
            finding(
                "update_ratio_high",
                "warning",
                f"The learning rate is likely far too high: {why} (||dW||/||W||"
                + (", at the schedule's peak learning rate" if scaled_any else "")
                + f"; {ref}). Largest: {worst[1]['name']} at {worst[0]:.3g}.",
                step=0,
                module=worst[1].get("module") or None,
                evidence={
                    "median_ratio": _f(med),
                    "worst_param": worst[1]["name"],
                    "worst_ratio": _f(worst[0]),
                    "n_params_above": len(high),
                    "threshold_median": median_high,
                    "threshold": t["update_high"],
                    "loss_improves": improves,
                    "scaled_to_peak_lr": scaled_any,
                    "reference": ref,
                    "examples": {
                        r[1]["name"]: _f(r[0]) for r in sorted(ratios, key=lambda r: -r[0])[:MAX_LISTED]
                    },
                },
            )
        )
    if 0 < med < t["update_low"]:
        out.append(
            finding(
                "update_ratio_low",
                "warning",
                f"Optimizer steps change weights by a median {med:.3g} of their size (||dW||/||W||"
                + (", at the schedule's peak learning rate" if scaled_any else "")
                + f"; {ref}): the learning rate is likely far too low.",
                step=0,
                module=None,
                evidence={
                    "median_ratio": _f(med),
                    "threshold": t["update_low"],
                    "n_weights": len(ratios),
                    "examples": {
                        r[1]["name"]: _f(r[0]) for r in sorted(ratios, key=lambda r: r[0])[:MAX_LISTED]
                    },
                    "scaled_to_peak_lr": scaled_any,
                    "reference": ref,
                },
            )
        )
    return out


def layer_grad_rms(stats):
    """[(module, grad RMS of its weights)] in forward order (embeddings and 1-d params excluded);
    layers whose weights got no gradient are listed with 0.0."""
    order = {m["name"]: m.get("order") for m in stats.get("modules", [])}
    mtype = {m["name"]: m.get("type") for m in stats.get("modules", [])}
    steps = max(1, int(stats.get("valid_steps", 1) or 1))
    acc = {}  # type: dict
    for p in stats.get("params", []):
        if not p.get("requires_grad") or p.get("ndim", 0) < 2:
            continue
        mod = p.get("module", "")
        if mtype.get(mod) in EMBEDDINGS:
            continue
        norms = [_num(x) for x in (p.get("grad_norms") or [])[:steps]]
        norms = [x for x in norms if x is not None and math.isfinite(x)]
        sq, n = acc.get(mod, (0.0, 0))
        acc[mod] = (sq + (statistics.median(norms) ** 2 if norms else 0.0), n + p["numel"])
    rows = [(m, math.sqrt(sq / n)) for m, (sq, n) in acc.items() if n]
    rows.sort(key=lambda r: (order.get(r[0]) is None, order.get(r[0]) or 0))
    return rows


def module_grad_rms(stats):
    """{module: grad RMS over its direct trainable params that receive gradients} (embeddings excluded)."""
    mtype = {m["name"]: m.get("type") for m in stats.get("modules", [])}
    steps = max(1, int(stats.get("valid_steps", 1) or 1))
    acc = {}  # type: dict
    for p in stats.get("params", []):
        if not p.get("requires_grad") or mtype.get(p.get("module", "")) in EMBEDDINGS:
            continue
        g = grad_rms(p, steps)
        if not g:
            continue
        mod = p.get("module", "")
        sq, n = acc.get(mod, (0.0, 0))
        acc[mod] = (sq + g * g * p["numel"], n + p["numel"])
    return {m: math.sqrt(sq / n) for m, (sq, n) in acc.items() if n and sq > 0}

"""Probe rules: gradients that do not arrive, stay, or move the weights; train/eval mode; accumulation.

`grad_not_zeroed`, `no_gradient`, `params_not_updated`, `train_mode_off`, `dropout_in_eval`,
`grad_accumulation_mismatch`. Every finding names the modules and their parameters. Standard library only.
"""

import math

try:
    from ._ts_probe_util import (
        MAX_LISTED,
        THRESHOLDS,
        _f,
        _finite,
        _num,
        display,
        finding,
        highest_modules,
        short_list,
    )
except ImportError:  # the runner's own folder (user's interpreter)
    from _ts_probe_util import (  # type: ignore[no-redef]
        MAX_LISTED,
        THRESHOLDS,
        _f,
        _finite,
        _num,
        display,
        finding,
        highest_modules,
        short_list,
    )


def grad_not_zeroed(trainable):
    # a parameter no optimizer holds is never stepped, so its stale .grad does no harm (params_not_updated
    # names it); optimizer.zero_grad() only clears what the optimizer holds
    stale = [p for p in trainable if p.get("stale_steps") and p.get("in_optimizer") is not False]
    if not stale:
        return []
    first = min(min(p["stale_steps"]) for p in stale)
    mods = sorted({p.get("module") or "" for p in stale})
    return [
        finding(
            "grad_not_zeroed",
            "error",
            f"Gradients from an earlier step were still present when a new backward started "
            f"({len(stale)} of {len(trainable)} trainable parameters, e.g. {short_list(p['name'] for p in stale)}), "
            "so they accumulate across steps.",
            step=first,
            module=mods[0] or None if len(mods) == 1 else None,
            evidence={
                "params": [p["name"] for p in stale[:MAX_LISTED]],
                "n_params": len(stale),
                "modules": [m or "(model)" for m in mods[:MAX_LISTED]],
                "hint": "call optimizer.zero_grad() (or model.zero_grad()) once per step before backward",
            },
        )
    ]


def _is_factor(p):
    """A parameter that multiplies (a weight, a gain, a ReZero/LayerScale scalar), not one that is added (a bias)."""
    return "bias" not in p["name"].rpartition(".")[2]


def _grads(p, grad_steps):
    norms = (p.get("grad_norms") or [])[:grad_steps]
    return norms if grad_steps > 0 and len(norms) >= grad_steps else None


def _all_exactly_zero(p, grad_steps):
    norms = _grads(p, grad_steps)
    return norms is not None and all(x is not None and _num(x) == 0.0 for x in norms)


def zero_factors(trainable, grad_steps):
    """Exactly-zero factors at the first observed step: (dead, blocked_until).

    `dead`: zero factors whose gradient was exactly 0 at every observed step and which never moved (a
    product of zeros: each zero factor blocks the other's gradient, for ever). `blocked_until`: the
    step until which the other zero factors (zero-initialised heads, ReZero, LayerScale, zero residual
    projections) still blocked the layers below them: the step after their first update.
    """
    zero = [p for p in trainable if _is_factor(p) and _num(p.get("init_norm")) == 0.0]
    dead = [p for p in zero if _all_exactly_zero(p, grad_steps) and not p.get("changed_steps")]
    dead_names = {p["name"] for p in dead}
    moved = [min(p.get("changed_steps") or [10**9]) for p in zero if p["name"] not in dead_names]
    return dead, (max(moved) + 1 if moved else 0)


def _reached(p, trainable, grad_steps):
    """Does gradient arrive at the output of `p`'s module (another parameter of it, its bias, gets some)?
    Then `p`'s exactly-zero gradient comes from its own zero input, not from a zero above it."""
    for q in trainable:
        if q is p or q.get("module") != p.get("module"):
            continue
        norms = _grads(q, grad_steps) or []
        if any(x is not None and _num(x) not in (None, 0.0) and _finite(x) for x in norms):
            return True
    return False


def _parent(module):
    return module.rpartition(".")[0]


def role_key(name):
    """The path with numeric parts (block indices) replaced by '*': `blocks.3.attn` -> `blocks.*.attn`."""
    return ".".join("*" if part.isdigit() else part for part in name.split("."))


def _factor_name(p):
    """`proj_qkv.weight` -> `proj_qkv` (a module's weight is the module to a reader); other names stay,
    and so do numbered layers (`2.weight` of a Sequential)."""
    rel = _relative(p)
    short = rel[: -len(".weight")] if rel.endswith(".weight") else rel
    return rel if short.isdigit() else short


def _relative(p):
    parent = _parent(p.get("module") or "")
    return p["name"][len(parent) + 1 :] if parent else p["name"]


def _common(a, b):
    """How many leading path parts two module paths share."""
    n = 0
    for x, y in zip(a.split("."), b.split(".")):  # noqa: B905
        if x != y:
            break
        n += 1
    return n


def _dead_product_findings(dead, lacking, reason, trainable, grad_steps):
    """One finding per group of zero factors that never move, named together by their role; the other
    parameters with exactly zero gradient (below those zeros) are named with the group nearest them."""
    groups = {}  # type: dict
    for p in dead:
        groups.setdefault(role_key(_parent(p.get("module") or "")), []).append(p)
    keys = sorted(groups)
    parents = {k: sorted({_parent(p.get("module") or "") for p in groups[k]}) for k in keys}
    own = {p["name"] for p in dead}
    below = {k: [] for k in keys}  # type: dict
    for q in trainable:
        n = q["name"]
        if n in own or n not in lacking or reason.get(n) != "zero":
            continue
        mod = q.get("module") or ""
        best = max(keys, key=lambda k: max(_common(mod, pa) for pa in parents[k]))
        below[best].append(q)
    out = []
    covered = set(own)
    for key in keys:
        members = groups[key]
        factors = list(dict.fromkeys(_factor_name(m) for m in members))  # in the model's own order
        pars = parents[key]
        inside = [q for q in below[key] if any(q["name"].startswith(pa + ".") or not pa for pa in pars)]
        outside = [q for q in below[key] if q not in inside]
        covered.update(q["name"] for q in below[key])
        weights = [
            q
            for q in trainable
            if q.get("ndim", 0) >= 2 and any(q["name"].startswith(pa + ".") for pa in pars)
        ]
        all_weights = bool(weights) and all(q["name"] in covered for q in weights)
        where = key or "the model"
        blocks = f" ({len(pars)} blocks)" if len(pars) > 1 else ""
        if len(factors) >= 2:
            if all_weights:
                msg = (
                    f"Every weight of {where}{blocks} gets exactly 0 gradient over {grad_steps} observed step(s); "
                    f"{_and(factors)} are all-zero: a product of zeros never moves (each zero factor blocks "
                    "the other's gradient)."
                )
            else:
                msg = (
                    f"{_and(factors)} of {where}{blocks} are all-zero and get exactly 0 gradient over {grad_steps} "
                    "observed step(s): a product of zeros never moves (each zero factor blocks the other's "
                    "gradient)."
                )
            hint = "initialise at most one factor of a product at zero (e.g. the output projection only)"
        else:
            msg = (
                f"{factors[0]} of {where}{blocks} starts at exactly zero and gets exactly 0 gradient over "
                f"{grad_steps} observed step(s): it never moves (its input is zero too, or every path to it "
                "runs through another zero)."
            )
            hint = "do not initialise it at zero, or check what feeds it"
        if outside:
            roles = sorted({role_key(q.get("module") or "") or "the model" for q in outside})
            msg += f" {_and(roles)} get exactly 0 as well: their path to the loss runs through these zeros."
        names = [m["name"] for m in members] + [q["name"] for q in inside + outside]
        out.append(
            dict(
                failure_modes=["bad-initialisation"],
                **finding(
                    "no_gradient",
                    "error",
                    msg,
                    step=0,
                    module=pars[0] or None,
                    evidence={
                        "params": names[:MAX_LISTED],
                        "n_params": len(names),
                        "zero_factors": factors,
                        "modules": pars[:MAX_LISTED],
                        "n_modules": len(pars),
                        "also_zero": sorted({role_key(q.get("module") or "") for q in outside})[:MAX_LISTED],
                        "gradient": ["zero"],
                        "steps": grad_steps,
                        "init": "exactly zero",
                        "hint": hint,
                    },
                ),
            )
        )
    return out, covered


def _and(items):
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def no_gradient(stats, trainable, grad_steps, modules, notes):
    pbm = stats.get("params_by_module", {})
    dead, blocked_until = zero_factors(trainable, grad_steps)
    judged = blocked_until < grad_steps  # else a moving zero factor still blocked the layers below it
    lacking = set()
    reason = {}
    excused = []
    for p in trainable:
        norms = _grads(p, grad_steps)
        if norms is None:
            continue
        if all(x is None for x in norms):
            lacking.add(p["name"])
            reason[p["name"]] = "none"
        elif all(x is None or _num(x) == 0.0 for x in norms):
            if not judged:
                excused.append(p["name"])
                continue
            lacking.add(p["name"])
            reason[p["name"]] = "cleared" if p.get("cleared_steps") else "zero"
    out = []  # type: list
    covered = set()
    if not judged:  # a zero factor whose own module's output receives gradient is dead whatever blocks others
        groups = {}  # type: dict
        for p in dead:
            groups.setdefault(role_key(_parent(p.get("module") or "")), []).append(p)
        dead = [
            p for ps in groups.values() if any(_reached(m, trainable, grad_steps) for m in ps) for p in ps
        ]
        for p in dead:
            lacking.add(p["name"])
            reason[p["name"]] = "zero"
            if p["name"] in excused:
                excused.remove(p["name"])
    if dead:
        found, covered = _dead_product_findings(dead, lacking, reason, trainable, grad_steps)
        out += found
    if excused:
        named = {p["name"] for p in dead}
        zero = [
            p["name"]
            for p in trainable
            if _is_factor(p) and _num(p.get("init_norm")) == 0.0 and p["name"] not in named
        ]
        notes.append(
            f"Zero-initialised weights ({short_list(zero)}) block the gradient of the layers below them "
            f"until their first update, which came at or after the last observed step; {short_list(excused)} "
            "were not judged for no_gradient: observe more steps."
        )
    rest = lacking - covered
    if not rest:
        return out
    called = {m["name"]: m.get("calls", 0) for m in modules}
    owner_type = {m["name"]: m.get("type") for m in modules}
    tops = highest_modules(rest, pbm)
    whole = {n for mod in tops for n in pbm.get(mod, []) if n in rest}
    # parameters whose module also holds parameters that do get gradients: named under their own module
    partial = sorted({p.get("module", "") for p in trainable if p["name"] in rest and p["name"] not in whole})
    listed = [(mod, [n for n in pbm.get(mod, []) if n in rest], False) for mod in tops]
    listed += [
        (mod, [p["name"] for p in trainable if p.get("module", "") == mod and p["name"] in rest], True)
        for mod in partial
    ]
    by_role = {}  # type: dict
    for mod, names, part in listed:
        kinds = tuple(sorted({reason[n] for n in names if n in reason}))
        key = (role_key(mod), kinds, part, called.get(mod, 0) == 0 and mod != "")
        by_role.setdefault(key, []).append((mod, names))
    for (role, kinds, part, never_called), members in list(by_role.items())[:MAX_LISTED]:
        mods = [m for m, _ in members]
        names = [n for _, ns in members for n in ns]
        mod = mods[0]
        if never_called:
            why = "it was never called in the forward pass (an unused branch)"
        elif list(kinds) == ["cleared"]:
            why = (
                "backward computed their gradient, but .grad was empty or zero when optimizer.step() ran "
                "(zero_grad() between backward() and step()?)"
            )
        elif "zero" in kinds and "none" not in kinds:
            why = "their gradients are exactly zero"
        else:
            why = "no gradient reaches them (a detached path, a no_grad block or an output that is not used)"
        where = display(mod) if len(mods) == 1 else f"{role} ({len(mods)} blocks: {short_list(mods, 3)})"
        if part:
            shown = [n[len(mod) + 1 :] if mod else n for n in names] if len(mods) == 1 else names
            what = f"Parameter(s) {short_list(shown)} of {where}"
        else:
            what = f"Parameters of {where} ({short_list(names)})"
        ev = {
            "params": names[:MAX_LISTED],
            "n_params": len(names),
            "gradient": list(kinds),
            "module_called": not never_called,
            "type": owner_type.get(mod),
        }
        if len(mods) > 1:
            ev["modules"] = mods[:MAX_LISTED]
            ev["n_modules"] = len(mods)
        out.append(
            finding(
                "no_gradient",
                "warning",
                f"{what} require grad but get none: {why}.",
                step=0,
                module=mod or None,
                evidence=ev,
            )
        )
    return out


def params_not_updated(stats, trainable, grad_steps, rms, floor, top_rms, modules):
    if not stats.get("updates_measured") or grad_steps < 1:
        return []
    pbm = stats.get("params_by_module", {})
    owner_type = {m["name"]: m.get("type") for m in modules}
    stuck = set()
    info = {}
    for p in trainable:
        got = [
            i
            for i, x in enumerate((p.get("grad_norms") or [])[:grad_steps])
            if _finite(x) and _num(x) > 0 and (_num(x) / math.sqrt(max(1, p.get("numel", 1)))) > floor
        ]
        changed = p.get("changed_steps") or []
        measured = stats.get("measured_at")
        if measured is not None and not set(got) & set(measured):
            continue  # no step where it had a gradient was measured (live mode measures every few steps)
        in_opt = p.get("in_optimizer", True) is not False
        lr_zero = _num(p.get("lr")) == 0
        if in_opt and not lr_zero and rms.get(p["name"], 0.0) < top_rms * 1e-3:
            continue  # a vanishing gradient can underflow the update; vanishing_gradients covers it
        if got and not changed and (grad_steps >= 2 or not p.get("in_optimizer", True)):
            stuck.add(p["name"])
            info[p["name"]] = {"in_optimizer": p.get("in_optimizer"), "lr": p.get("lr")}
    if not stuck:
        return []
    with_grad = {m: [n for n in ps if n in rms and rms[n] > floor] for m, ps in pbm.items()}
    groups = [  # type: list
        (mod, [n for n in with_grad.get(mod, []) if n in stuck], [])
        for mod in highest_modules(stuck, with_grad)
    ]
    covered = {n for _, names, _ in groups for n in names}
    # parameters stuck for a definite reason (missing from the optimizer, lr 0) whose module
    # also holds parameters that do move: compared per parameter, reported under their module
    partial = {}  # type: dict
    for p in trainable:
        n = p["name"]
        if n in stuck and n not in covered and (info[n]["in_optimizer"] is False or _num(info[n]["lr"]) == 0):
            partial.setdefault(p.get("module", ""), []).append(n)
    for mod, names in partial.items():
        moved = [n for n in with_grad.get(mod, []) if n not in stuck]
        groups.append((mod, names, moved))
    out = []
    for mod, names, moved in groups[:MAX_LISTED]:
        missing = [n for n in names if info.get(n, {}).get("in_optimizer") is False]
        lrs = sorted({info[n]["lr"] for n in names if n in info and info[n].get("lr") is not None})
        ev = {
            "params": names[:MAX_LISTED],
            "n_params": len(names),
            "in_optimizer": not missing,
            "learning_rates": lrs,
            "steps": grad_steps,
        }
        if missing:
            why = "they are missing from the optimizer's parameter groups"
            ev["hint"] = (
                "build the optimizer after the model is final (a head replaced after the optimizer was made "
                "keeps the old parameters in it), and check the param-group filters"
            )
        elif lrs and all(x == 0 for x in lrs):
            why = "their learning rate is 0"
            ev["hint"] = (
                "if this is the first step of a warmup schedule, give the scheduler as 'scheduler' in the "
                "entrypoint so the probe steps it; otherwise the schedule never leaves 0"
            )
        else:
            why = "the optimizer step leaves them unchanged"
        what = f"Parameters {short_list(names)} of {display(mod)}"
        if moved:
            ev["updated_params"] = moved[:MAX_LISTED]
            what = f"Parameter(s) {short_list(names)} of {display(mod)} ({owner_type.get(mod)})"
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
    return out


def mode_rules(stats):
    out = []
    ev = stats.get("eval_during_training")
    if ev:
        mods = ev.get("modules") or []
        out.append(
            finding(
                "train_mode_off",
                "error",
                f"The model is in eval mode (model.training is False) during training step {ev.get('step')}: "
                f"the layers {short_list(mods)} behave as at evaluation time (no dropout, frozen batch-norm statistics). "
                "Call model.train() before training steps (after every evaluation).",
                step=ev.get("step"),
                module=mods[0] if len(mods) == 1 else None,
                evidence={
                    "modules": mods,
                    "n_modules": ev.get("n_modules"),
                    "hint": "model.train() after evaluation",
                },
            )
        )
    ev = stats.get("eval_mode_check")
    if ev and ev.get("active"):
        mods = ev["active"]
        where = ev.get("source") or "the evaluation step (eval_fn)"
        out.append(
            finding(
                "dropout_in_eval",
                "warning" if ev.get("source") else "error",
                f"During {where}, the layers {short_list(mods)} are still in training mode: dropout "
                "drops units and batch norm updates its running statistics at evaluation time, so metrics are "
                "noisy and pessimistic. Call model.eval() before evaluating.",
                step=ev.get("step"),
                module=mods[0] if len(mods) == 1 else None,
                evidence={
                    "modules": mods,
                    "n_modules": ev.get("n_active"),
                    "hint": "model.eval() before evaluation",
                },
            )
        )
    return out


def _steps_within_a_step(stats):
    """A step_fn that steps optimizers several times (a critic's 5 steps, PPO's minibatch epochs) or with a
    closure (L-BFGS re-evaluates): a backward after an optimizer step is a new step, not a micro-batch."""
    opts = (stats.get("regime_obs") or {}).get("optimizers") or []
    taken = sum(o.get("steps", 0) for o in opts)
    return any(o.get("closure_steps") for o in opts) or taken > max(1, int(stats.get("steps") or 0))


def discarded_micro_batches(stats):
    """Without the replayed check (the user's own loop): a later backward of one optimizer step found the
    gradient of an earlier backward cleared (zero_grad inside the accumulation loop)."""
    if stats.get("accumulation") or stats.get("single_optimizer") is False or _steps_within_a_step(stats):
        return []
    steps = [i for i, n in enumerate(stats.get("discarded_micro") or []) if n]
    if not steps:
        return []
    micro = stats.get("micro_backwards") or []
    k = max((micro[i] for i in steps if i < len(micro)), default=0)
    return [
        finding(
            "grad_accumulation_mismatch",
            "error",
            f"Each optimizer step takes {k} backward passes, but before a later one the gradient of the earlier "
            f"ones had been cleared (at {len(steps)} of the observed steps): only the last micro-batch's "
            "gradient reaches optimizer.step(), e.g. zero_grad() inside the accumulation loop.",
            step=steps[0],
            module=None,
            evidence={
                "micro_batches": k,
                "steps_with_discards": len(steps),
                "hint": "call zero_grad() once per optimizer step, after optimizer.step(), not per micro-batch",
            },
        )
    ]


def accumulation_rules(stats):
    acc = stats.get("accumulation")
    if not acc or acc.get("skipped"):
        return discarded_micro_batches(stats)
    t = THRESHOLDS
    k = acc["micro_batches"]
    ratio = _num(acc.get("norm_ratio"))
    cos = _num(acc.get("cosine"))
    kept = _num(acc.get("kept_cosine"))
    ev = {k2: v for k2, v in acc.items() if k2 != "skipped"}
    ev["reference"] = (
        "the gradient of one batch k times larger (the whole batch given to step_fn), same parameters, dropout and batch norm in eval mode for both"
    )
    if kept is not None and kept < 1 - 1e-3:
        msg = (
            f"The gradient at optimizer.step is not the sum of the {k} micro-batches' gradients (cosine "
            f"{kept:.3f}): gradients of earlier micro-batches were discarded, e.g. zero_grad() inside the "
            "accumulation loop."
        )
        ev["hint"] = "call zero_grad() once per optimizer step, after optimizer.step(), not per micro-batch"
    elif (
        ratio is not None
        and cos is not None
        and cos >= t["accum_min_cos"]
        and abs(ratio - k) / k < t["accum_ratio_tol"]
        and k >= 2
    ):
        msg = (
            f"The {k} accumulated micro-batches give {ratio:.3g}x the gradient of one {k}x larger batch: the "
            f"loss is not divided by the number of accumulation steps ({k})."
        )
        ev["hint"] = f"divide each micro-batch loss by {k} before backward"
    elif (
        ratio is not None
        and cos is not None
        and (cos < t["accum_min_cos"] or abs(ratio - 1) > t["accum_ratio_tol"])
    ):
        msg = (
            f"The {k} accumulated micro-batches do not give the gradient of one {k}x larger batch (norm ratio "
            f"{ratio:.3g}, cosine {cos:.3f}; equal would be 1 and 1)."
        )
    else:
        return []
    return [finding("grad_accumulation_mismatch", "error", msg, step=0, module=None, evidence=ev)]


__all__ = ["_f", "accumulation_rules", "grad_not_zeroed", "mode_rules", "no_gradient", "params_not_updated"]

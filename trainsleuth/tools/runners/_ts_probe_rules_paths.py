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
    stale = [p for p in trainable if p.get("stale_steps")]
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


def _zero_init_until(trainable):
    """Steps during which an exactly-zero weight (a zero-initialised head) still blocked gradients below it."""
    zero = [p for p in trainable if p.get("ndim", 0) >= 2 and _num(p.get("init_norm")) == 0.0]
    if not zero:
        return 0, []
    moved = [min(p.get("changed_steps") or [10**9]) for p in zero]
    return max(moved) + 1, [p["name"] for p in zero]


def no_gradient(stats, trainable, grad_steps, modules, notes):
    pbm = stats.get("params_by_module", {})
    blocked_until, zero_weights = _zero_init_until(trainable)
    lacking = set()
    reason = {}
    excused = False
    for p in trainable:
        norms = (p.get("grad_norms") or [])[:grad_steps]
        if grad_steps <= 0 or len(norms) < grad_steps:
            continue
        if all(x is None for x in norms):
            lacking.add(p["name"])
            reason[p["name"]] = "none"
        elif all(x is None or _num(x) == 0.0 for x in norms):
            if blocked_until >= grad_steps:
                excused = True  # a zero-initialised weight above them had not moved yet
                continue
            lacking.add(p["name"])
            reason[p["name"]] = "zero"
    if excused:
        notes.append(
            f"Zero-initialised weights ({short_list(zero_weights)}) block the gradient of the layers below them "
            "until their first update; those layers were not judged for no_gradient."
        )
    out = []  # type: list
    if not lacking:
        return out
    called = {m["name"]: m.get("calls", 0) for m in modules}
    owner_type = {m["name"]: m.get("type") for m in modules}
    for mod in highest_modules(lacking, pbm)[:MAX_LISTED]:
        names = [n for n in pbm.get(mod, []) if n in lacking]
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
                f"Parameters of {display(mod)} ({short_list(names)}) require grad but get none: {why}.",
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


def accumulation_rules(stats):
    acc = stats.get("accumulation")
    if not acc or acc.get("skipped"):
        return []
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

"""Probe rules that exist because of a regime: target copies, frozen teachers, KL signs, advantages.

`target_network_shared`, `target_not_updated`, `target_receives_gradient`, `teacher_in_train_mode`,
`loss_term_wrong_sign`, `advantage_not_detached`. Each reads the observations of `_ts_probe_watch`
(stats["regime_obs"]) through `_ts_probe_regimes`. Standard library only.
"""

try:
    from . import _ts_probe_regimes as regimes
    from ._ts_probe_util import MAX_LISTED, _f, display, finding, highest_modules, short_list
except ImportError:  # the runner's own folder (user's interpreter)
    import _ts_probe_regimes as regimes  # type: ignore[no-redef]
    from _ts_probe_util import MAX_LISTED, _f, display, finding, highest_modules, short_list  # type: ignore[no-redef]


def _by_module(names, obs):
    """Highest modules holding exactly these parameters (every parameter counted, frozen ones too)."""
    names = set(names)
    for u in obs.get("units", []):  # a whole network: its name (the variable the run holds it in)
        if u["label"] and set(u["params"]) == names:
            return [u["label"]]
    pbm = {}  # type: dict
    for u in obs.get("units", []):
        for n in u["params"]:
            parts = n.split(".")
            for j in range(len(parts)):
                pbm.setdefault(".".join(parts[:j]), set()).add(n)
    # the highest module whose parameters are exactly these (a whole network under a container)
    exact = [m for m, ps in pbm.items() if m and ps == names]
    if exact:
        return [min(exact, key=lambda m: (m.count("."), m))]
    return highest_modules(names, {m: sorted(ps) for m, ps in pbm.items()}) or [""]


def regime_rules(stats):
    obs = stats.get("regime_obs") or {}
    if not obs:
        return []
    out = []
    out += target_network_shared(obs)
    targets = regimes.ema_targets(stats)
    out += target_receives_gradient(stats, targets)
    out += target_not_updated(stats, targets)
    out += teacher_in_train_mode(stats, targets)
    out += loss_term_wrong_sign(obs)
    out += advantage_not_detached(obs)
    out += unheld_params_not_updated(stats)
    return out


def unheld_params_not_updated(stats):
    """`params_not_updated` for a network the statistics do not cover (the command form probes the models
    an optimizer holds): its parameters get gradients, no optimizer holds them, and they never change."""
    obs = stats.get("regime_obs") or {}
    known = {p["name"] for p in stats.get("params", [])}
    changed = set(obs.get("frozen_changed") or {})
    out = []
    for u in obs.get("units", []):
        stuck = [n for n in regimes.unheld_with_grad(obs, u) if n not in known and n not in changed]
        if not stuck or len(stuck) * 2 < len(u["trainable"]):
            continue
        mods = _by_module(stuck, obs)
        orphans = [o for o in obs.get("optimizers", []) if o.get("steps") and o.get("outside_units")]
        hint = (
            "check which parameters each optimizer is built over (a copy-paste slip builds two "
            "optimizers over the same network)"
        )
        if orphans:
            o = orphans[0]
            hint = (
                f"{o['type']} steps {o['outside_units']} tensor(s) that no module of the run holds: it was "
                f"built before {display(mods[0])} was replaced (build the optimizer after the last module swap)"
            )
        out.append(
            finding(
                "params_not_updated",
                "error",
                f"Parameters of {display(mods[0])} ({short_list(stuck)}) receive gradients but no optimizer holds "
                "them, and they never change: they are missing from every optimizer's parameter groups.",
                step=0,
                module=mods[0] or None,
                evidence={
                    "params": stuck[:MAX_LISTED],
                    "n_params": len(stuck),
                    "in_optimizer": False,
                    "hint": hint,
                },
            )
        )
    return out


def discount(findings, stats, notes):
    """Findings that are the regime's design, not a bug, taken out (with a note saying so).

    Adversarial training observed in the user's own loop (each optimizer step its own iteration): the
    generator's loss runs through the discriminator, whose gradient from it lands on top of the
    discriminator's last gradient and is cleared by the discriminator's zero_grad before its own step.
    Neither that stale gradient nor that cleared one reaches an optimizer step."""
    names = {r["name"] for r in stats.get("regimes") or []}
    if "adversarial" not in names or stats.get("mode") != "observed":
        return findings
    obs = stats.get("regime_obs") or {}
    crossed = set()
    for o in obs.get("optimizers", []):
        if o.get("steps"):
            crossed |= set(o.get("reached_other") or []) - set(o.get("params") or [])
    out = []
    dropped = set()
    for f in findings:
        ev = f.get("evidence") or {}
        params = set(ev.get("params") or [])
        if ev.get("n_params", len(params)) != len(params):
            params = set()  # only some are listed: keep the finding
        if f["code"] == "grad_not_zeroed" and params and params <= crossed:
            dropped.add(f["code"])
            continue
        if f["code"] == "no_gradient" and ev.get("gradient") == ["cleared"] and params and params <= crossed:
            dropped.add(f["code"])
            continue
        out.append(f)
    if dropped:
        notes.append(
            "Not reported in this adversarial pair: "
            + ", ".join(sorted(dropped))
            + " on parameters the other network's loss reaches; that gradient is cleared by their own "
            "zero_grad() before their own optimizer step, by design."
        )
    return out


def target_network_shared(obs):
    after = obs.get("after_step") or {}
    same = after.get("self_copy") or []
    if not same:
        return []
    mods = _by_module(same, obs)
    return [
        finding(
            "target_network_shared",
            "error",
            f"After the optimizer step, {display(mods[0])} is copied into itself ({len(same)} tensors, e.g. "
            f"{short_list(same)}): the network the copy should come from and the one it goes to are the same "
            "object, so a 'target' network is the online network and moves with every update.",
            step=0,
            module=mods[0] or None,
            evidence={
                "params": same[:MAX_LISTED],
                "n_params": len(same),
                "modules": mods[:MAX_LISTED],
                "observed": "copy_ whose source and destination share storage, in the code after optimizer.step()",
                "hint": "make the target a separate copy: target = copy.deepcopy(online).requires_grad_(False)",
            },
        )
    ]


def target_receives_gradient(stats, targets):
    out = []
    grad = {p["name"]: p.get("grad_norms") or [] for p in stats.get("params", [])}
    obs = stats.get("regime_obs") or {}
    for t in targets:
        if t["kind"] == "read_only":
            continue
        got = [n for n in t["trained"] if any(x is not None and x != 0 for x in grad.get(n, []))]
        if not got:
            continue
        label = t["unit"]
        in_opt = [n for n in got if (obs.get("param_optimizers") or {}).get(n)]
        out.append(
            finding(
                "target_receives_gradient",
                "error",
                f"{display(label)} is {t['how']} (a target/EMA copy), but it also receives gradient "
                f"({len(got)} tensors, e.g. {short_list(got)})"
                + (" and an optimizer holds it" if in_opt else "")
                + ": the loss trains the copy it should be measured against (a missing torch.no_grad() or "
                "detach on the target branch).",
                step=0,
                module=label or None,
                evidence={
                    "params": got[:MAX_LISTED],
                    "n_params": len(got),
                    "in_optimizer": in_opt[:MAX_LISTED],
                    "updated_from": t["sources"],
                    "hint": "compute the target's output under torch.no_grad() (or .detach() it) and freeze it: "
                    "requires_grad_(False), outside every optimizer",
                },
            )
        )
    return out


def target_not_updated(stats, targets):
    obs = stats.get("regime_obs") or {}
    after = obs.get("after_step") or {}
    read = after.get("read") or {}
    windows = after.get("windows") or 0
    out = []
    for t in targets:
        if t["kind"] != "read_only":
            continue
        label = t["unit"]
        reads = [n for n in _unit(obs, label) if read.get(n)]
        per_step = max(read[n] for n in reads)
        out.append(
            finding(
                "target_not_updated",
                "error",
                f"{display(label)} has the same shape as {short_list(t['sources'])}, which trains, and the code after "
                f"each optimizer step reads its weights with arithmetic ({len(reads)} tensors, up to {per_step} "
                f"reads over {windows} steps) but never writes them: it keeps its initial weights. An EMA written "
                "out of place (ema.mul(a).add(p)) throws its result away.",
                step=0,
                module=label or None,
                evidence={
                    "params": reads[:MAX_LISTED],
                    "n_params": len(reads),
                    "follows": t["sources"],
                    "steps": windows,
                    "observed": "reads of its weights after optimizer.step(), no in-place write, no change",
                    "hint": "update in place: ema.mul_(a).add_(p, alpha=1 - a), or torch._foreach_lerp_",
                },
            )
        )
    return out


def _unit(obs, label):
    for u in obs.get("units", []):
        if u["label"] == label:
            return u["params"]
    return []


def teacher_in_train_mode(stats, targets):
    out = []
    for t in regimes.frozen_teachers(stats, targets):
        if not t["no_grad_only"] or not t["active"]:
            continue
        label = t["unit"]
        out.append(
            finding(
                "teacher_in_train_mode",
                "warning",
                f"{display(label)} runs only under no_grad and nothing trains it (a frozen teacher or target), "
                f"but it is in training mode: {short_list(t['active'])}. Dropout drops units in its outputs and "
                "batch norm normalises with each batch's statistics and overwrites its running averages.",
                step=0,
                module=label or None,
                evidence={
                    "active_layers": t["active"][:MAX_LISTED],
                    "n_active": len(t["active"]),
                    "hint": f"call {label or 'the teacher'}.eval() once after freezing it (and after every model.train())",
                },
            )
        )
    return out


def loss_term_wrong_sign(obs):
    g = obs.get("graph") or {}
    out = []
    for t in g.get("kl_terms") or []:
        if t.get("sign", 0) >= 0:
            continue
        var_mods = _by_module(t.get("variance_params") or [], obs) if t.get("variance_params") else []
        mean_mods = _by_module(t.get("mean_params") or [], obs) if t.get("mean_params") else []
        mods = [m for m in var_mods + mean_mods if m]
        module = mods[0] if mods else None
        out.append(
            finding(
                "loss_term_wrong_sign",
                "error",
                f"The loss holds a Gaussian KL term ({t['form']} beside mu^2"
                + (f", from {short_list(mods)}" if mods else "")
                + ") with a negative coefficient: minimising the loss maximises the KL divergence, which a "
                "KL term can grow without bound (means pushed away from 0, variances to 0 or infinity).",
                step=0,
                module=module,
                evidence={
                    "form": t["form"],
                    "coefficient_sign": t["sign"],
                    "modules": mods[:MAX_LISTED],
                    "variance_params": (t.get("variance_params") or [])[:MAX_LISTED],
                    "mean_params": (t.get("mean_params") or [])[:MAX_LISTED],
                    "hint": "KLD = -0.5 * sum(1 + logvar - mu^2 - exp(logvar)) is >= 0 and is ADDED to the loss",
                },
            )
        )
        break
    return out


def advantage_not_detached(obs):
    g = obs.get("graph") or {}
    only = g.get("pg_weight_only_params") or []
    if not g.get("pg_with_grad") or not only:
        return []
    mods = _by_module(only, obs)
    return [
        finding(
            "advantage_not_detached",
            "error",
            f"The policy-gradient loss multiplies log-probabilities of actions by a weight (the advantage) that "
            f"still carries gradient into {short_list(m or 'the model' for m in mods)} ({short_list(only)}), "
            "which the log-probabilities do not use: the policy term trains the critic/baseline against its own "
            "loss.",
            step=0,
            module=mods[0] or None,
            evidence={
                "params": only[:MAX_LISTED],
                "n_params": len(only),
                "terms_with_gradient": g.get("pg_with_grad"),
                "terms": g.get("pg_terms"),
                "weight_range": [_f(g.get("pg_weight_min")), _f(g.get("pg_weight_max"))],
                "hint": "advantage = (returns - values).detach() (or value.item()) in the policy term",
            },
        )
    ]


__all__ = ["discount", "regime_rules"]

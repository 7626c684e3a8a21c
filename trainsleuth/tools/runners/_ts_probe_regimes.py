"""Which kind of training the probe watched, from what it observed (`stats["regime_obs"]`). Stdlib only.

Each regime is recognised from an observation, never from a file or variable name, and changes how
some rules judge (`EFFECTS`; the rules read `regime_names(stats)`):

- `adversarial`: two optimizers over disjoint parameters, each stepping after a backward pass of its
  own, and one network's loss reaching the other's weights (a GAN's G loss runs through D);
- `rl`: the loss weights log-probabilities of selected actions by returns or advantages (the graph);
- `closure`: an optimizer steps with a closure that re-evaluates the loss (L-BFGS's line search);
- `kl`: the loss holds a Gaussian KL term, `exp(x) - x` (or `v - log v`) beside `mu^2`;
- `ema_target`: a network is written from another network's weights after the optimizer step (an
  EMA or a target copy), or its frozen weights change without a gradient;
- `frozen_teacher`: a network runs but nothing trains it and it does not change (a teacher, a loss
  network), while another network trains;
- `sparse`: parameters receive sparse gradients (`nn.Embedding(sparse=True)`);
- `accumulating_optimizer`: Adagrad/Adadelta, whose steps shrink as the squared-gradient sum grows;
- `linear_model`: the model is one linear map (its loss is convex in the weights);
- `input_optimization`: an optimizer trains tensors no module holds (style transfer's image);
- `supervised`: none of the non-stationary regimes above (one loss that should go down).
"""

try:
    from ._ts_probe_util import short_list
except ImportError:  # the runner's own folder (user's interpreter)
    from _ts_probe_util import short_list  # type: ignore[no-redef]

EFFECTS = {
    "adversarial": "the loss trend is not judged (adversarial losses oscillate by design) and update ratios "
    "are called too high only past 0.5",
    "rl": "the loss trend is not judged (returns and advantages change with the policy) and update ratios "
    "are called too high only past 0.5",
    "closure": "update ratios are not judged: the line search chooses the step length",
    "kl": "the KL term's sign is checked",
    "ema_target": "the copy is checked to follow its network, without gradients of its own",
    "frozen_teacher": "the frozen network is checked to run in eval mode",
    "sparse": "sparse gradients are read through their stored values; sparse tables are not judged by "
    "update ratio",
    "accumulating_optimizer": "its decaying steps are judged by the first step's size, not by the usual band",
    "linear_model": "update ratios are not judged (the weights start far from their solution's scale); a "
    "step size that is too large shows as a rising loss",
    "input_optimization": "the optimised tensors are not probed; the modules the run calls are",
    "supervised": "every rule applies as usual",
}
NON_STATIONARY = ("adversarial", "rl")
ACCUMULATING = ("Adagrad", "Adadelta")


def regime_names(stats):
    return {r["name"] for r in (stats.get("regimes") or [])}


def unit_of(obs, name):
    """The network (unit label) a parameter belongs to; '' is the whole model."""
    for u in obs.get("units", []):
        if name in u["params"]:
            return u["label"]
    best = None
    for u in obs.get("units", []):
        prefix = u.get("prefix", u["label"] + "." if u["label"] else "")
        if name.startswith(prefix) and (best is None or len(prefix) > len(best[1])):
            best = (u["label"], prefix)
    return best[0] if best else None


def _units(obs, names):
    return sorted({unit_of(obs, n) or "(model)" for n in names})


def _say(units):
    return short_list(u or "the model" for u in units)


def detect(stats):
    """[{name, because, effects}] for the statistics record of one probe run."""
    obs = stats.get("regime_obs") or {}
    out = []

    def add(name, because):
        out.append({"name": name, "because": because, "effects": EFFECTS[name]})

    adversarial = _adversarial(obs)
    if adversarial:
        add("adversarial", adversarial)
    g = obs.get("graph") or {}
    if g.get("pg_terms"):
        lo, hi = g.get("pg_weight_min"), g.get("pg_weight_max")
        mixed = lo is not None and hi is not None and lo < 0 < hi
        if g.get("pg_with_grad") or mixed or obs.get("sampled"):
            why = [f"{g['pg_terms']} log-probabilities of selected actions weighted by returns/advantages"]
            if mixed:
                why.append(f"weights from {lo:.3g} to {hi:.3g}")
            if obs.get("sampled"):
                why.append(f"actions sampled {obs['sampled']} times")
            add("rl", "the loss holds " + ", ".join(why))
    closure = [o for o in obs.get("optimizers", []) if o.get("closure_steps")]
    if closure:
        o = closure[0]
        add(
            "closure",
            f"{o['type']} steps with a closure that re-evaluates the loss ({o['closure_steps']} steps)",
        )
    kl = g.get("kl_terms") or []
    if kl:
        t = kl[0]
        add("kl", f"the loss holds a Gaussian KL term ({t['form']} with mu^2{_heads(t)})")
    targets = ema_targets(stats)
    if targets:
        parts = [f"{t['unit']} ({t['how']})" for t in targets]
        add("ema_target", "networks updated without gradients: " + "; ".join(parts))
    teachers = frozen_teachers(stats, targets)
    if teachers:
        add("frozen_teacher", f"{_say(t['unit'] for t in teachers)} run(s) while nothing trains them")
    sparse = obs.get("sparse_grads") or []
    if sparse:
        add("sparse", f"{short_list(sparse)} receive sparse gradients")
    acc = [o for o in obs.get("optimizers", []) if o.get("type") in ACCUMULATING and o.get("steps")]
    if acc:
        o = acc[0]
        add("accumulating_optimizer", f"{o['type']} (lr {o['hyper'].get('lr')}) over {o['n_params']} tensors")
    linear = linear_model(stats)
    if linear:
        add("linear_model", linear)
    outside = [o for o in obs.get("optimizers", []) if o.get("steps") and o.get("outside_units")]
    # with trainable parameters that run, get gradients and sit in no optimizer, the optimizer's own tensors
    # are those of a module replaced after it was built, not an input
    if outside and not any(unheld_with_grad(obs, u) for u in obs.get("units", [])):
        o = outside[0]
        add(
            "input_optimization",
            f"{o['type']} trains {o['outside_units']} tensor(s) that no module holds (an input "
            "optimised directly, as style transfer optimises its image)",
        )
    if not any(r["name"] in NON_STATIONARY for r in out):
        out.insert(
            0,
            {
                "name": "supervised",
                "because": "one loss minimised step by step",
                "effects": EFFECTS["supervised"],
            },
        )
    return out


def unheld_with_grad(obs, unit):
    """The trainable parameters of `unit` (a module the run calls) that get gradients while no optimizer
    holds them."""
    held = set(obs.get("param_optimizers") or {})
    got = set(obs.get("got_grad") or [])
    return [n for n in unit.get("trainable", []) if n in got and n not in held]


def _heads(term):
    heads = []
    for key in ("mean_params", "variance_params"):
        mods = sorted({n.rpartition(".")[0] for n in term.get(key, [])})
        if mods:
            heads.append(f"{'mean' if key == 'mean_params' else 'log-variance'} from {', '.join(mods)}")
    return (": " + "; ".join(heads)) if heads else ""


def _adversarial(obs):
    """Two optimizers over disjoint parameters; one steps after a backward of its own that also reaches
    the other's parameters, and the other steps after its own backward too (or never steps at all)."""
    opts = [o for o in obs.get("optimizers", []) if o.get("params")]
    for a in opts:
        if not (a.get("steps") and a.get("own_backward_steps")):
            continue
        pa = set(a["params"])
        for b in opts:
            pb = set(b["params"])
            if b is a or pa & pb or not set(a.get("reached_other", [])) & pb:
                continue
            if b.get("steps") and not b.get("own_backward_steps"):
                continue  # one backward, then both step: one model split over two optimizers
            ua, ub = _units(obs, pa), _units(obs, pb)
            never = "" if b.get("steps") else f" (the {b['type']} over {_say(ub)} never steps)"
            return (
                f"{a['type']} over {_say(ua)} and {b['type']} over {_say(ub)}, and the loss stepped for {_say(ua)} "
                f"also sends gradient into {_say(ub)}{never}"
            )
    return None


def _trained(stats):
    """Names of parameters that received a gradient or that an optimizer step changed (being listed in an
    optimizer is not enough: Adam skips a frozen parameter it holds)."""
    obs = stats.get("regime_obs") or {}
    frozen = set(obs.get("frozen") or [])
    return {
        p["name"]
        for p in stats.get("params", [])
        if p.get("requires_grad")
        and (p.get("changed_steps") or any(x is not None and x != 0 for x in (p.get("grad_norms") or [])))
    } | (set(obs.get("got_grad") or []) - frozen)


def _unit_params(obs):
    return {u["label"]: u for u in obs.get("units", [])}


def ema_targets(stats):
    """Networks that are copies of another: written from it after the step, changing without a gradient,
    or (kind "read_only") read by arithmetic after each step while frozen and the same shape as a network
    that trains. [{unit, kind, sources, how, trained}]"""
    obs = stats.get("regime_obs") or {}
    units = _unit_params(obs)
    if len(units) < 2:
        return []
    after = obs.get("after_step") or {}
    written = after.get("written") or {}
    sources = after.get("sources") or {}
    read = after.get("read") or {}
    changed = obs.get("frozen_changed") or {}
    self_copy = set(after.get("self_copy") or [])
    trained = _trained(stats)
    out = []
    for label, u in units.items():
        names = u["params"]
        if not names:
            continue
        wrote = [n for n in names if n in written and n not in self_copy]
        srcs = sorted({unit_of(obs, s) for n in wrote for s in sources.get(n, [])} - {label, None})
        moved = [n for n in names if changed.get(n) and n not in trained]  # not trained by hand either
        reads = [n for n in names if read.get(n)]
        kind = None
        if wrote and srcs:
            kind = "written"
            steps = max(written[n] for n in wrote)
            how = f"written from {_say(srcs)} after {steps} of {after.get('windows', 0)} optimizer steps"
        elif moved and len(moved) * 2 >= len(names):
            kind = "changed"
            how = "its frozen weights change between steps without a gradient"
        elif reads and len(reads) * 2 >= len(names) and not u.get("trainable") and not set(names) & trained:
            srcs = [m for m in mirrors(obs, label) if set(_unit_params(obs)[m]["params"]) & trained]
            if srcs and not any(n in written for n in names):
                kind = "read_only"
                how = f"the same shape as {_say(srcs)}, read by arithmetic after each optimizer step"
        if kind is None:
            continue
        out.append(
            {
                "unit": label,
                "kind": kind,
                "sources": srcs,
                "how": how,
                "trained": sorted(set(names) & trained),
            }
        )
    return out


def mirrors(obs, label):
    """Units with exactly the same parameter shapes as `label` (a copy of the same network)."""
    units = _unit_params(obs)
    me = units.get(label)
    if me is None or not me.get("shapes"):
        return []
    return [v["label"] for v in units.values() if v["label"] != label and v.get("shapes") == me["shapes"]]


def frozen_teachers(stats, targets=None):
    """Networks that run, receive no training and do not change, beside a network that trains."""
    obs = stats.get("regime_obs") or {}
    units = _unit_params(obs)
    if len(units) < 2:
        return []
    targets = targets if targets is not None else ema_targets(stats)
    target_units = {t["unit"] for t in targets}
    trained = _trained(stats)
    after = obs.get("after_step") or {}
    touched = set(after.get("read") or {}) | set(after.get("written") or {})
    out = []
    trains = [u for u in units.values() if set(u["params"]) & trained]
    held = set(obs.get("param_optimizers") or {})
    for label, u in units.items():
        names = set(u["params"])
        if not names or label in target_units or names & trained or names & touched:
            continue
        if set(u.get("trainable") or []) & held:
            continue  # meant to train (requires grad, in an optimizer): a broken path, not a teacher
        if not (u.get("grad_calls") or u.get("no_grad_calls")):
            continue
        if not [t for t in trains if t["label"] != label]:
            continue
        out.append(
            {
                "unit": label,
                "no_grad_only": bool(u.get("no_grad_calls")) and not u.get("grad_calls"),
                "active": u.get("train_active_without_grad") or [],
            }
        )
    return out


def linear_model(stats):
    """A sentence when the trainable model is one linear map (one weight matrix of a Linear, and its bias)."""
    mtype = {m["name"]: m.get("type") for m in stats.get("modules", [])}
    trainable = [p for p in stats.get("params", []) if p.get("requires_grad")]
    mats = [p for p in trainable if p.get("ndim", 0) >= 2]
    if len(mats) != 1 or len(trainable) > 2:
        return None
    p = mats[0]
    if mtype.get(p.get("module", "")) not in ("Linear", "Bilinear", "LazyLinear"):
        return None
    if any(q.get("module") != p.get("module") for q in stats.get("params", [])):
        return None  # frozen layers before it (a linear probe on a backbone) make it more than one map
    shape = p.get("shape") or []
    dims = f" {shape[1]}->{shape[0]}" if len(shape) == 2 else ""
    return f"the model is one linear map (Linear{dims}, {p.get('numel')} weights)"


def sentence(regimes):
    """One sentence for the report: which regime(s) the probe assumed and what that changed."""
    if not regimes:
        return ""
    names = [r["name"] for r in regimes]
    lead = "Assumed regime: " + ", ".join(names) + ". "
    details = [f"{r['name']}: {r['because']} ({r['effects']})" for r in regimes if r["name"] != "supervised"]
    return lead + ("; ".join(details) + "." if details else "Every rule applies as usual.")


__all__ = ["EFFECTS", "NON_STATIONARY", "detect", "ema_targets", "frozen_teachers", "linear_model", "mirrors",
           "regime_names", "sentence", "unit_of"]  # fmt: skip

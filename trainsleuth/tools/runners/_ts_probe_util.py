"""Shared helpers of the probe rules: JSON-safe numbers, the finding record, thresholds.

Standard library only: the rules run in the user's interpreter, in live mode and in the server.
"""

import math

THRESHOLDS = {
    # exploding_gradients: growth of the global norm step over step (each of the last steps)
    "explode_growth": 5.0,
    # exploding/vanishing through depth: last / first member of a group of repeated blocks
    "depth_ratio": 1e4,
    # exploding_gradients: a weight's gradient RMS over its own RMS (one SGD step at lr 1e-3 would
    # change it by more than its size)
    "explode_relative": 1e3,
    # ... and standing out: >= this many times the other weights' median relative gradient (unless that
    # median is itself past explode_relative: then the explosion is everywhere)
    "explode_peer_ratio": 10.0,
    # gradient_imbalance: a module's grad RMS over the median of the other modules' (both conditions)
    "imbalance_ratio": 100.0,
    # ... caused by its input scale (module input RMS over the median input RMS) ...
    "imbalance_input_ratio": 10.0,
    # ... or by its parameter scale (relative gradient ||g||/||W|| over the median relative gradient)
    "imbalance_relative": 1e4,
    # tensors initialised below this RMS (zero-init heads, ConvNeXt layer scale) have no scale to compare with
    "min_init_rms": 1e-5,
    # dead_relu: fraction of units never active, and the observations per unit needed to judge
    "dead_warn": 0.6,
    "dead_error": 0.99,
    "dead_min_obs": 16,
    # saturated_activations: fraction of outputs in the flat region
    "sat_warn": 0.6,
    "sat_error": 0.95,
    "sat_min_n": 64,
    # update ratios ||dW|| / ||W|| (weights with >= 2 dims and a non-negligible initial scale)
    "update_median_high": 0.1,  # the median weight is rewritten by 10% per step: lr far too high
    "update_high": 0.5,  # one weight changes by half its size per step (with a loss that does not improve)
    "update_low": 1e-5,
    "update_min_rms": 1e-3,
    # loss_component_imbalance: largest / smallest per-term gradient norm on the shared parameters
    "component_ratio": 100.0,
    # loss trend on one fixed batch (loss_not_decreasing needs at least 5 finite steps)
    "loss_min_drop": 0.002,
    "loss_diverge": 1.5,
    # loss_not_decreasing is only judged when the steps' first-order predicted decrease (sum of g.dW)
    # would have lowered the loss by at least this fraction
    "predicted_min_drop": 0.01,
    # input_not_normalized: root-mean-square of a floating-point model input
    "input_rms": 20.0,
    # a gradient counts as received when its RMS exceeds this fraction of the median param grad RMS
    "grad_floor": 1e-4,
    # initial_loss_off: first classification loss over -log(1/C)
    "init_loss_ratio": 1.5,
    "init_loss_excess": 1.0,
    # grad_accumulation_mismatch: accumulated vs one large batch
    "accum_ratio_tol": 0.25,
    "accum_min_cos": 0.95,
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
    try:
        return float(x)
    except (TypeError, ValueError):
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


def display(module):
    return module if module else "the model's top-level forward"


def short_list(names, limit=4):
    names = list(names)
    text = ", ".join(names[:limit])
    return text + (f" and {len(names) - limit} more" if len(names) > limit else "")


def highest_modules(flagged, params_by_module):
    """Highest module paths whose (trainable) parameters are all in `flagged` (a set of param names).

    `params_by_module` maps every module path ('' is the root) to its trainable parameter names
    (recursively). Returns module paths, highest first, with no path under another returned one. The
    root is never returned when it holds no parameter of its own: its top-level children holding
    flagged parameters are named instead (a frozen backbone with an untrained head names the head).
    """
    full = [m for m, ps in params_by_module.items() if ps and all(p in flagged for p in ps)]
    full.sort(key=lambda m: (m.count(".") + (1 if m else 0), m))
    out = []  # type: list
    for m in full:
        if any(m == o or (o == "" or m.startswith(o + ".")) for o in out):
            continue
        out.append(m)
    if out == [""]:
        own = [p for p in params_by_module.get("", []) if "." not in p]
        if not own:
            return _expand_root(params_by_module)
    return out


def _children(params_by_module, prefix):
    start = prefix + "." if prefix else ""
    return sorted(
        m
        for m, ps in params_by_module.items()
        if ps and m != prefix and m.startswith(start) and "." not in m[len(start) :]
    )


def _expand_root(params_by_module):
    """Name the root's flagged content by its highest children, collapsing single-child chains."""
    prefix = ""
    while True:
        kids = _children(params_by_module, prefix)
        own = any(p.rpartition(".")[0] == prefix for p in params_by_module.get(prefix, []))
        if len(kids) == 1 and not own:
            prefix = kids[0]
            continue
        if not kids:
            return [prefix]
        return kids + ([prefix] if own and prefix else [])

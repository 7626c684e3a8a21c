"""Where a NaN/Inf first appears: forward origin, backward origin, and the loss-code entry point.

Functions of a `Recorder` (`_ts_probe_core`) after a step whose loss or gradients went non-finite.
Torch only.
"""

try:
    from . import _ts_probe_tensors as tens
except ImportError:  # the runner's own folder (user's interpreter)
    import _ts_probe_tensors as tens  # type: ignore[no-redef]


def forward_origin(rec, k):
    """The first module (completion order) with finite inputs and a non-finite output."""
    evs = rec._events
    if not evs:
        return None
    roots = [e for e in evs if e["parent"] is None]
    if (
        roots
        and all(e["in_finite"] is False for e in roots)
        and not any(e["in_finite"] and e["out_finite"] is False for e in evs)
    ):
        return {"step": k, "kind": "input", "module": None, "type": None}
    cands = [
        (e["done"], i)
        for i, e in enumerate(evs)
        if e["in_finite"] and e["out_finite"] is False and e["done"] is not None
    ]
    if not cands:
        return None
    _, idx = min(cands)
    ev = evs[idx]
    name = ev["name"]
    origin = {"step": k, "module": name, "type": rec.types.get(name), "kind": "module"}
    children = [e for e in evs if e["parent"] == idx]
    if children:
        last_finite = None
        first_bad = None
        for c in children:
            if c["in_finite"] is False:
                first_bad = c
                break
            if c["out_finite"]:
                last_finite = c
        if first_bad is not None or all(c["out_finite"] for c in children):
            origin["kind"] = "parent_code"
            origin["last_finite_child"] = last_finite["name"] if last_finite else None
            origin["first_nonfinite_input_child"] = first_bad["name"] if first_bad else None
    before = ev.get("bad_params")
    if before is not None:
        origin["nonfinite_params_before_step"] = before[:10]
        origin["nonfinite_params_before_step_measured"] = (
            f"during the forward pass of probe step {k}, before its optimizer step"
        )
    after = [n for (n, p), o in zip(rec.params, rec.owner) if o == name and not tens.tensor_finite(p)]  # noqa: B905
    if after:
        origin["nonfinite_params_after_step"] = after[:10]
        origin["nonfinite_params_after_step_measured"] = f"after the optimizer step of probe step {k}"
    return origin


def backward_origin(rec, k):
    """Among modules whose output gradient was finite, the first whose input or parameter gradient was not."""
    evs = rec._events
    best = None
    for i, e in enumerate(evs):
        if e["out_grad_nf"] is not None:
            continue  # the non-finite gradient arrived from outside this module
        times = [t for t in (e["in_grad_nf"], rec._param_nf_t.get(e["name"])) if t is not None]
        if not times:
            continue
        key = (min(times), -e["depth"])
        if best is None or key < best[0]:
            best = (key, i)
    if best is None:
        roots = [e for e in evs if e["parent"] is None]
        if any(e["out_grad_nf"] is not None for e in roots):
            return loss_entry_origin(rec, k)
        if rec._param_nf_t:
            mod = min(rec._param_nf_t, key=lambda m: rec._param_nf_t[m])
            return {"step": k, "module": mod or None, "type": rec.types.get(mod), "kind": "module"}
        return None
    e = evs[best[1]]
    bad = [n for (n, _p), s in zip(rec.params, rec.pstats) if s.nonfinite]  # noqa: B905
    return {
        "step": k,
        "module": e["name"] or None,
        "type": rec.types.get(e["name"]),
        "kind": "module",
        "nonfinite_param_grads": bad[:10],
    }


def loss_entry_origin(rec, k):
    """The non-finite gradient came from outside the model (the loss code): name the first module
    it reaches in backward order (output gradient or parameter gradient; deepest on ties,
    the top-level module only when nothing below it received one)."""
    origin = {"step": k, "module": None, "kind": "loss", "entered_from": "loss function"}
    cands = []
    for e in rec._events:
        times = [t for t in (e["out_grad_nf"], rec._param_nf_t.get(e["name"])) if t is not None]
        if times:
            cands.append((e["parent"] is None, min(times), -e["depth"], e["name"]))
    if not cands:
        return origin
    is_root, _t, _d, name = min(cands)
    if not is_root and name:
        bad = [n for (n, _p), s in zip(rec.params, rec.pstats) if s.nonfinite]  # noqa: B905
        origin.update({"module": name, "type": rec.types.get(name), "nonfinite_param_grads": bad[:10]})
    return origin

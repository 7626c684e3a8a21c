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
    if ev.get("op"):
        origin["op"] = ev["op"]
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
    if rec._loss_backward_op:
        origin["op"] = rec._loss_backward_op
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


MAX_GRAPH_NODES = 400


def op_name(node):
    """`LogBackward0` -> `log`: the forward operation an autograd node stands for."""
    name = type(node).__name__ if not hasattr(node, "name") else node.name()
    for suffix in ("Backward0", "Backward1", "Backward2", "Backward"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name[:1].lower() + name[1:]


def _saved_inputs(node):
    out = []
    for attr in dir(node):
        if not attr.startswith("_saved_") or attr == "_saved_result":
            continue
        try:
            value = getattr(node, attr)
        except Exception:
            continue
        for t in value if isinstance(value, (list, tuple)) else (value,):
            if hasattr(t, "is_floating_point") and (t.is_floating_point() or t.is_complex()):
                out.append(t)
    return out


# operations that move, select or add values without making a NaN of their own: looked past
PASS_THROUGH = {
    "add",
    "sub",
    "rsub",
    "cat",
    "stack",
    "view",
    "reshape",
    "unsafeView",
    "permute",
    "transpose",
    "t",
    "expand",
    "select",
    "slice",
    "clone",
    "squeeze",
    "unsqueeze",
    "neg",
    "maskedFill",
    "index",
    "split",
    "splitWithSizes",
    "unbind",
    "alias",
    "toCopy",
    "copy",
    "mean",
    "sum",
    "unsafeSplit",
    "flatten",
    "mul",  # by a constant (a product of tensors saves both and is decided on them)
    "div",
}


def _bad(t, nan):
    """Does `t` hold the kind of value being traced (NaN when the output has NaN, else any Inf)?"""
    import torch

    with torch.no_grad():
        return bool(torch.isnan(t).any()) if nan else not tens.tensor_finite(t)


def nonfinite_op(output, stop=()):
    """The autograd operation that first made a non-finite value in `output` (a tensor or a nested output).

    Traces NaN when the output holds NaN (an -inf used as a mask is deliberate; the NaN it turns into is
    not), else Inf. Walks back from the output's node through nodes known to produce the bad value: the
    first whose saved inputs are all free of it made it. Nodes that save no input are looked past when
    they only move or add values (view, cat, add, masked_fill); otherwise (softmax, exp, which keep only
    their result) they are named. `stop` holds the nodes of the module's inputs (not looked past).
    Returns None when the value has no autograd history (computed without gradients)."""
    import torch

    start = None
    nan = False
    for t in tens.float_tensors(output):
        if getattr(t, "grad_fn", None) is not None and not tens.tensor_finite(t):
            start = t.grad_fn
            with torch.no_grad():
                nan = bool(torch.isnan(t).any())
            break
    if start is None:
        return None
    stop_ids = {id(n) for n in stop if n is not None}
    queue = [start]
    seen = set()
    while queue and len(seen) < MAX_GRAPH_NODES:
        node = queue.pop(0)
        if id(node) in seen or id(node) in stop_ids:
            continue
        seen.add(id(node))
        saved = _saved_inputs(node)
        if saved:
            bad = [t for t in saved if _bad(t, nan)]
            if not bad:
                return op_name(node)  # its inputs were free of it, its output is not
            nxt = [t.grad_fn for t in bad if getattr(t, "grad_fn", None) is not None]
            if not nxt:
                return op_name(node)  # a bad leaf input (a parameter or the batch) fed it
            queue.extend(nxt)
        elif op_name(node) in PASS_THROUGH:
            queue.extend(n for n, _ in getattr(node, "next_functions", ()) if n is not None)
        else:
            return op_name(node)
    return op_name(start)


def watch_loss_backward(rec, start, stop):
    """Hook the loss code's autograd nodes (from the loss down to the models' outputs): the first whose
    incoming gradient is finite and outgoing one is not is recorded as `rec._loss_backward_op`."""
    stop_ids = {id(n) for n in stop}
    queue = [start]
    seen = set()

    def make(node):
        def hook(grad_inputs, grad_outputs):
            if rec._loss_backward_op is not None or not rec.active_backward():
                return None
            try:
                if all(g is None or tens.tensor_finite(g) for g in grad_outputs) and not all(
                    g is None or tens.tensor_finite(g) for g in grad_inputs
                ):
                    rec._loss_backward_op = op_name(node)
            except Exception as exc:
                rec.internal(exc)
            return None

        return hook

    while queue and len(seen) < 200:
        node = queue.pop(0)
        if id(node) in seen or id(node) in stop_ids or type(node).__name__ == "AccumulateGrad":
            continue
        seen.add(id(node))
        try:
            node.register_hook(make(node))
        except Exception:
            continue
        queue.extend(n for n, _ in getattr(node, "next_functions", ()) if n is not None)

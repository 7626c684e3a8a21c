"""What the probe plugin of the observer needs beyond the shared recorder: models, state, one record.

- `unwrap`: the model a wrapper trains (DDP / DataParallel `.module`, torch.compile's `_orig_mod`);
- `StateWatch`: whether each buffer and frozen tensor of the models that ran changed over the
  observed steps (a version counter and a checksum, no copy of the tensors);
- `merge`: one statistics record (`Recorder.summary` format, read by `_ts_probe_rules.analyze`) from
  the recorders of several models, parameters named as the user sees them, prefixed by the model's
  label only when there is more than one;
- `param_rows`: the parameters that matter, bounded (the report is not a dump of every tensor).

Torch only where a tensor is touched; the merge is plain Python.
"""

import math

try:
    from ._ts_probe_util import _f, _num
except ImportError:  # the runner's own folder (user's interpreter)
    from _ts_probe_util import _f, _num  # type: ignore[no-redef]

WRAPPERS = ("DistributedDataParallel", "DataParallel", "DeepSpeedEngine", "FullyShardedDataParallel")
MAX_STATE_LISTED = 30
MAX_PARAM_ROWS = 40
COMPILED_PART = "._orig_mod"


def unwrap(module):
    """(the model inside, [wrapper kinds]): DDP/DataParallel `.module`, torch.compile `_orig_mod`."""
    kinds = []
    for _ in range(6):
        inner = getattr(module, "_orig_mod", None)
        kind = "torch.compile"
        if inner is None and type(module).__name__ in WRAPPERS:
            inner = getattr(module, "module", None)
            kind = type(module).__name__
        if inner is None or not hasattr(inner, "named_parameters"):
            break
        kinds.append(kind)
        module = inner
    return module, kinds


def clean_name(name):
    """Parameter and module paths as the user writes them: no `_orig_mod` of a compiled submodule."""
    if "_orig_mod" not in name:
        return name
    name = name.replace(COMPILED_PART, "")
    return (
        name[len("_orig_mod.") :] if name.startswith("_orig_mod.") else ("" if name == "_orig_mod" else name)
    )


# ---------------------------------------------------------------------- buffers and frozen tensors


class StateWatch:
    """Buffers and frozen parameters of every model that ran: did they change over the observed steps?"""

    def __init__(self, torch):
        self.torch = torch
        self.entries = []  # (label, name, kind, tensor, version, ptr, checksum)
        self._seen = set()

    def add(self, label, module):
        torch = self.torch
        items = [(n, "buffer", t) for n, t in module.named_buffers()]
        items += [(n, "frozen", p) for n, p in module.named_parameters() if not p.requires_grad]
        fresh = [(n, kind, t) for n, kind, t in items if id(t) not in self._seen and t is not None]
        if not fresh:
            return
        sums = self._checksums([t for _, _, t in fresh])
        for (n, kind, t), cs in zip(fresh, sums):  # noqa: B905
            self._seen.add(id(t))
            self.entries.append([label, clean_name(n), kind, t, _version(t), _ptr(t), cs])
        del torch

    def _checksums(self, tensors):
        torch = self.torch
        if not tensors:
            return []
        with torch.no_grad():
            parts = []
            for t in tensors:
                if t.numel() == 0:
                    parts.append(torch.zeros(2, dtype=torch.float64, device=t.device))
                    continue
                x = t.detach().reshape(-1)
                x = x.double() if not x.is_complex() else x.abs().double()
                parts.append(torch.stack([x.sum(), (x * x).sum()]))
            try:
                return [tuple(v) for v in torch.stack([q.cpu() for q in parts]).tolist()]
            except Exception:
                return [tuple(float(v) for v in q.cpu()) for q in parts]

    def report(self, prefix):
        """{tracked, changed: [{name, kind}], n_changed, unchanged_kinds}; names prefixed by label if asked."""
        moved = []
        for e in self.entries:
            t, version, ptr = e[3], e[4], e[5]
            if _version(t) == version and _ptr(t) == ptr:
                continue
            moved.append(e)
        now = self._checksums([e[3] for e in moved])
        changed = []
        for e, cs in zip(moved, now):  # noqa: B905
            if cs != e[6]:
                name = f"{e[0]}.{e[1]}" if prefix and e[1] else (e[0] if prefix else e[1])
                changed.append({"name": name, "kind": e[2], "numel": int(e[3].numel())})
        frozen = sum(1 for e in self.entries if e[2] == "frozen")
        return {
            "tracked": len(self.entries),
            "buffers": len(self.entries) - frozen,
            "frozen_params": frozen,
            "n_changed": len(changed),
            "changed": changed[:MAX_STATE_LISTED],
        }


def _version(t):
    try:
        return t._version
    except Exception:
        return -1


def _ptr(t):
    try:
        return t.data_ptr()
    except Exception:
        return None


# ---------------------------------------------------------------------- one statistics record


def _pre(label, name, prefix):
    name = clean_name(name)
    if not prefix:
        return name
    return f"{label}.{name}" if name else label


def merge(parts, prefix):
    """One statistics record from [(label, summary)] of several recorders (one per model)."""
    if len(parts) == 1 and not prefix:
        label, st = parts[0]
        out = dict(st)
        out["params"] = [
            dict(p, name=clean_name(p["name"]), module=clean_name(p["module"])) for p in st["params"]
        ]
        out["modules"] = [dict(m, name=clean_name(m["name"])) for m in st["modules"]]
        out["params_by_module"] = _by_module(out["params"])
        _rename_origins(out, label, False)
        return out
    params, modules = [], []
    order_base = 0
    for label, st in parts:
        for p in st["params"]:
            params.append(
                dict(p, name=_pre(label, p["name"], prefix), module=_pre(label, p["module"], prefix))
            )
        top = 0
        for m in st["modules"]:
            row = dict(m, name=_pre(label, m["name"], prefix))
            if row.get("order") is not None:
                row["order"] = row["order"] + order_base
                top = max(top, row["order"] + 1)
            modules.append(row)
        order_base = top
    first = parts[0][1]
    steps = max(st["steps"] for _, st in parts)
    valid = min(st["valid_steps"] for _, st in parts)
    out = {
        "mode": first["mode"],
        "fixed_batch": first["fixed_batch"],
        "steps": steps,
        "valid_steps": valid,
        "nonfinite_step": _min(st.get("nonfinite_step") for _, st in parts),
        "losses": first["losses"],
        "loss_terms": first.get("loss_terms", {}),
        "global_grad_norms": _combine(
            [st["global_grad_norms"] for _, st in parts], lambda xs: math.sqrt(sum(x * x for x in xs))
        ),
        "predicted_changes": _combine([st["predicted_changes"] for _, st in parts], sum),
        "micro_backwards": _combine([st["micro_backwards"] for _, st in parts], max),
        "discarded_micro": _combine([st.get("discarded_micro", []) for _, st in parts], sum),
        "measured_at": sorted({i for _, st in parts for i in st.get("measured_at", [])}),
        "step_lrs": first["step_lrs"],
        "peak_lrs": first["peak_lrs"],
        "forward_origin": None,
        "backward_origin": None,
        "loss_op": next((st.get("loss_op") for _, st in parts if st.get("loss_op")), None),
        "model_output_finite": _and_maps([st.get("model_output_finite", {}) for _, st in parts]),
        "term_grad_norms": {},
        "shared_params": 0,
        "updates_measured": any(st.get("updates_measured") for _, st in parts),
        "eval_during_training": None,
        "inputs": [],
        "params": params,
        "params_by_module": _by_module(params),
        "modules": modules,
        "internal_errors": [e for _, st in parts for e in st.get("internal_errors", [])][:10],
    }
    for label, st in parts:
        for key in ("forward_origin", "backward_origin", "eval_during_training"):
            value = st.get(key)
            if value and out[key] is None:
                out[key] = _renamed(value, label, prefix)
        if not out["inputs"] and st.get("inputs"):
            out["inputs"] = [
                dict(i, name=f"{label}:{i.get('name')}" if prefix else i.get("name")) for i in st["inputs"]
            ]
    return out


def _rename_origins(out, label, prefix):
    for key in ("forward_origin", "backward_origin", "eval_during_training"):
        if out.get(key):
            out[key] = _renamed(out[key], label, prefix)


def _renamed(value, label, prefix):
    value = dict(value)
    if value.get("module") is not None:
        value["module"] = _pre(label, value["module"], prefix)
    for key in (
        "modules",
        "nonfinite_param_grads",
        "nonfinite_params_before_step",
        "nonfinite_params_after_step",
    ):
        if isinstance(value.get(key), list):
            value[key] = [_pre(label, n, prefix) for n in value[key]]
    for key in ("last_finite_child", "first_nonfinite_input_child"):
        if value.get(key):
            value[key] = _pre(label, value[key], prefix)
    return value


def _by_module(params):
    pbm = {}  # type: dict
    for p in params:
        if not p.get("requires_grad"):
            continue
        parts = p["name"].split(".")
        for j in range(len(parts)):
            pbm.setdefault(".".join(parts[:j]), []).append(p["name"])
    return pbm


def _min(values):
    vals = [v for v in values if v is not None]
    return min(vals) if vals else None


def _combine(lists, fn):
    n = max((len(lst) for lst in lists), default=0)
    out = []
    for i in range(n):
        vals = [_num(lst[i]) for lst in lists if i < len(lst) and lst[i] is not None]
        vals = [v for v in vals if v is not None]
        if not vals:
            out.append(None)
        elif not all(math.isfinite(v) for v in vals):
            out.append(_f(float("nan")))
        else:
            out.append(_f(fn(vals)))
    return out


def _and_maps(maps):
    keys = set(maps[0]) if maps else set()
    for m in maps[1:]:
        keys &= set(m)
    return {k: True for k in keys}


# ---------------------------------------------------------------------- the parameters that matter


def param_rows(stats, findings, limit=MAX_PARAM_ROWS):
    """A bounded per-parameter view: every parameter a finding names first, then those with exactly
    zero or no gradient, those outside every optimizer, then the largest by size."""
    named = []
    for f in findings:
        for n in (f.get("evidence") or {}).get("params", []) or []:
            if n not in named:
                named.append(n)
    by_name = {p["name"]: p for p in stats.get("params", [])}
    order = [n for n in named if n in by_name]
    rest = [p for p in stats.get("params", []) if p["name"] not in set(order)]

    def key(p):
        norms = [_num(x) for x in p.get("grad_norms") or []]
        dead = p.get("requires_grad") and norms and all(x is None or x == 0.0 for x in norms)
        orphan = p.get("requires_grad") and p.get("in_optimizer") is False
        return (not dead, not orphan, -int(p.get("numel") or 0))

    rest.sort(key=key)
    rows = []
    for p in [by_name[n] for n in order] + rest:
        if len(rows) >= limit:
            break
        rows.append(_row(p))
    return rows


def _row(p):
    norms = [_num(x) if x is not None else None for x in p.get("grad_norms") or []]
    finite = [x for x in norms if x is not None and math.isfinite(x)]
    ratios = [_num(x) for x in p.get("update_ratios") or [] if _num(x) is not None]
    if not p.get("requires_grad"):
        grad = "frozen"
    elif norms and all(x is None for x in norms):
        grad = "none"
    elif norms and all(x is None or x == 0.0 for x in norms):
        grad = "exactly zero"
    elif len(finite) < len([x for x in norms if x is not None]):
        grad = "non-finite"
    else:
        grad = "ok"
    return {
        "name": p["name"],
        "shape": p.get("shape"),
        "requires_grad": p.get("requires_grad"),
        "in_optimizer": p.get("in_optimizer"),
        "lr": p.get("lr"),
        "gradient": grad,
        "grad_norms": [_f(x) if x is not None else None for x in norms][:50],
        "update_ratio": _f(sum(ratios) / len(ratios)) if ratios else None,
        "changed_steps": len(p.get("changed_steps") or []),
        "init_norm": p.get("init_norm"),
    }


__all__ = ["StateWatch", "clean_name", "merge", "param_rows", "unwrap"]

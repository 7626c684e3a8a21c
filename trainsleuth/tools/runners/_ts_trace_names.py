"""Stable names for what the differential tracer recorded (a part of `Tracer`). Torch and stdlib only."""

from _ts_trace_util import TracerState, _norm_name, _ptr, _quiet


class Names(TracerState):
    """r<root>/<path> for parameters, buffers and modules; o<optimizer>/g<group>.<i> for the rest."""

    # ------------------------------------------------------------------ names

    @_quiet
    def _resolve(self):
        """Give every recorded tensor and module its stable name: r<root>/<path> (wrappers' prefixes dropped)."""
        by_id: dict = {}
        by_ptr: dict = {}
        by_mod: dict = {}
        display: dict = {}
        for root in self.obs.roots:
            m = root.module
            prefix = f"r{root.index}"
            display[prefix] = root.label
            try:
                for path, sub in m.named_modules(remove_duplicate=False):
                    key = f"{prefix}/{_norm_name(path)}".rstrip("/") if _norm_name(path) else prefix
                    by_mod.setdefault(id(sub), key)
                    display.setdefault(
                        key, f"{root.label}.{_norm_name(path)}" if _norm_name(path) else root.label
                    )
                for items in (
                    m.named_parameters(remove_duplicate=False),
                    m.named_buffers(remove_duplicate=False),
                ):
                    for name, t in items:
                        if t is None:
                            continue
                        key = f"{prefix}/{_norm_name(name)}"
                        by_id.setdefault(id(t), key)
                        ptr = _ptr(t)
                        if ptr:
                            by_ptr.setdefault(ptr, key)
                        display.setdefault(key, f"{root.label}.{_norm_name(name)}")
            except Exception as exc:
                self.note(f"could not name the parts of {root.label}: {exc!r}")
        for info in self.obs.optimizers:
            opt = info.optimizer
            if opt is None:
                continue
            for gi, g in enumerate(opt.param_groups):
                for j, p in enumerate(g["params"]):
                    if id(p) not in by_id:
                        key = f"o{info.index}/g{gi}.{j}"
                        by_id[id(p)] = key
                        display[key] = f"optimizer {info.index} group {gi} parameter {j} (in no model)"
        for ev in self.events:
            ref = ev.pop("_ref", None)
            grad_of = ev.pop("_grad_of", None)
            owner = grad_of() if grad_of is not None else None
            if owner is not None and id(owner) in by_id:
                ev["t"] = by_id[id(owner)] + ".grad"
                display.setdefault(ev["t"], display.get(by_id[id(owner)], by_id[id(owner)]) + ".grad")
            elif ref is not None:
                ev["t"] = self._name_of(ref, by_id, by_ptr, by_mod)
            mod = ev.pop("_mod", None)
            if mod is not None:
                m = mod()
                ev["m"] = by_mod.get(id(m), f"?{type(m).__name__}") if m is not None else "?"
            params = ev.pop("_params", None)
            if params is not None:
                names = []
                for r in params:
                    p = r()
                    names.append(by_id.get(id(p), "?") if p is not None else "?")
                ev["params"] = names
        return display

    def _name_of(self, ref, by_id, by_ptr, by_mod):
        kind, wref, ptr, extra = ref
        obj = wref() if wref is not None else None
        if kind == "module":
            if obj is None:
                return f"?{extra}"
            return by_mod.get(id(obj), f"?{extra}")
        if kind == "tensor":
            if obj is not None and id(obj) in by_id:
                return by_id[id(obj)]
            if ptr and ptr in by_ptr:
                return by_ptr[ptr]
            return "?tensor" + "x".join(str(d) for d in extra)
        return f"?{extra}"

"""Gradient-probe instrumentation: torch and the standard library only.

Used by the standalone `probe_runner.py` (in the user's interpreter) and by live mode
(`trainsleuth.probe.attach`). Hooks only observe: forward pre-hooks/hooks and tensor hooks
return None, statistics are computed on detached tensors under `torch.no_grad()`, nothing
draws random numbers and nothing is modified in place, so training is unchanged.
Full backward hooks are not used (they break on in-place activations).
"""

import dataclasses
import math

import torch

try:  # imported as part of the trainsleuth package (live mode)
    from . import _ts_probe_rules as rules
except ImportError:  # imported from the runner's own folder (user's interpreter)
    import _ts_probe_rules as rules  # type: ignore[no-redef]

RELU_TYPES = ("ReLU", "ReLU6")
SAT_TYPES = {"Tanh": "tanh", "Sigmoid": "sigmoid"}
SKIP_INPUT_WORDS = ("mask", "label", "target")
MAX_EVENTS = 50000
MAX_PARAMS_REPORTED = 5000


def _f(x):
    return rules._f(x)


def iter_tensors(obj, depth=0):
    """Every tensor in a (nested) structure: tensors, lists, tuples, dicts, dataclasses, HF-style outputs."""
    if isinstance(obj, torch.Tensor):
        yield obj
        return
    if depth > 5 or obj is None or isinstance(obj, (str, bytes, int, float, bool)):
        return
    if isinstance(obj, dict):
        for v in obj.values():
            yield from iter_tensors(v, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for v in obj[:256]:
            yield from iter_tensors(v, depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for fld in dataclasses.fields(obj):
            yield from iter_tensors(getattr(obj, fld.name, None), depth + 1)


def _float_tensors(obj):
    for t in iter_tensors(obj):
        if t.is_floating_point() or t.is_complex():
            yield t


def tensor_finite(t):
    """True when every element is finite. A finite sum proves it in one cheap pass."""
    with torch.no_grad():
        if t.numel() == 0:
            return True
        if bool(torch.isfinite(t.detach().sum())):
            return True
        return bool(torch.isfinite(t.detach()).all())


def _version(t):
    try:
        return t._version
    except Exception:
        return -1


def extract_loss(output):
    """`.loss`, `["loss"]` or a scalar output; None when there is none."""
    loss = getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    if isinstance(output, dict) and isinstance(output.get("loss"), torch.Tensor):
        return output["loss"]
    if isinstance(output, torch.Tensor) and output.numel() == 1:
        return output
    return None


class _ParamStat:
    __slots__ = (
        "changed_steps",
        "fired",
        "grad_norms",
        "init_rms",
        "none_steps",
        "nonfinite",
        "param_norms",
        "stale",
        "stale_steps",
        "sumsq",
        "update_ratios",
        "zero_steps",
    )

    def __init__(self):
        self.grad_norms = []
        self.param_norms = []
        self.update_ratios = []
        self.changed_steps = []
        self.stale_steps = []
        self.none_steps = 0
        self.zero_steps = 0
        self.init_rms = None
        self.fired = False
        self.sumsq = 0.0
        self.nonfinite = False
        self.stale = False


class Recorder:
    """Hooks a model (and optionally its optimizer) and accumulates per-step statistics.

    Call `begin_step(k)` before a step's forward, `end_step(loss, snapshot)` after the optimizer
    step; `snapshot_params()` right before the optimizer step (or before a user step_fn) enables
    update measurements. `summary()` returns the statistics `_ts_probe_rules.analyze` reads.
    """

    def __init__(self, model, optimizer=None, *, detail=True, history=None):
        self.model = model
        self.optimizer = optimizer
        self.detail = detail
        self.auto_detail = False
        self.history = history  # keep at most this many steps of per-param history (live mode)
        self.names = {}  # type: dict
        self.types = {}
        for name, m in model.named_modules():
            if id(m) not in self.names:
                self.names[id(m)] = name
                self.types[name] = type(m).__name__
        self.params = []
        seen = set()
        for name, p in model.named_parameters():
            if id(p) in seen:
                continue
            seen.add(id(p))
            self.params.append((name, p))
        self.pstats = [_ParamStat() for _ in self.params]
        self.owner = [name.rpartition(".")[0] for name, _ in self.params]
        self.opt_ids = {}
        if optimizer is not None:
            for g in optimizer.param_groups:
                for p in g["params"]:
                    self.opt_ids[id(p)] = g.get("lr")
        self.handles = []
        self.active = False
        self.paused = False
        self.step = -1
        self.steps_done = 0
        self.losses = []
        self.loss_terms = {}
        self.global_grad_norms = []
        self.first_order = {}
        self.calls = {}
        self.act = {}
        self.inputs = []
        self.forward_origin = None
        self.backward_origin = None
        self.nonfinite_step = None
        self.nonfinite_index = None
        self.model_output_finite = {}
        self.term_grad_norms = {}
        self.shared_params = 0
        self.updates_measured = False
        self.internal_errors = []
        self._order = 0
        self._reset_step_state()

    # ------------------------------------------------------------------ attach / detach

    def attach(self):
        for m in self.model.modules():
            self.handles.append(m.register_forward_pre_hook(self._pre, with_kwargs=True))
            self.handles.append(m.register_forward_hook(self._post, with_kwargs=True))
        for i, (_, p) in enumerate(self.params):
            if p.requires_grad:
                self.handles.append(p.register_hook(self._param_hook(i)))
        return self

    def detach(self):
        for h in self.handles:
            h.remove()
        self.handles = []

    # ------------------------------------------------------------------ per step

    def _reset_step_state(self):
        self._events = []
        self._stack = []
        self._cache = {}
        self._bclock = 0
        self._clock = 0
        self._root_calls = 0
        self._param_nf_t = {}
        self._loss_seen = None

    def begin_step(self, k):
        self.step = k
        self._reset_step_state()
        for s in self.pstats:
            s.fired = False
            s.sumsq = 0.0
            s.nonfinite = False
            s.stale = False
        self.active = True

    def snapshot_params(self):
        """Detached copies of the trainable parameters (taken right before an optimizer step)."""
        with torch.no_grad():
            return [p.detach().clone() if p.requires_grad else None for _, p in self.params]

    def end_step(self, loss=None, snapshot=None, terms=None):
        """Close the step: record loss, gradients, updates and origins. Returns True if all finite."""
        self.active = False
        k = self.step
        if loss is None:
            loss = self._loss_seen
        lval = None
        if loss is not None:
            try:
                lval = float(loss.detach().float()) if isinstance(loss, torch.Tensor) else float(loss)
            except Exception:
                lval = None
        self.losses.append(lval)
        for name, v in (terms or {}).items():
            try:
                self.loss_terms.setdefault(name, []).append(
                    float(v.detach().float()) if isinstance(v, torch.Tensor) else float(v)
                )
            except Exception:
                pass
        total_sq = 0.0
        any_nonfinite_grad = False
        for i, (_, p) in enumerate(self.params):
            s = self.pstats[i]
            if not p.requires_grad:
                continue
            if not s.fired:
                s.none_steps += 1
                s.grad_norms.append(None)
            else:
                n = math.sqrt(s.sumsq) if math.isfinite(s.sumsq) else float("inf")
                if s.nonfinite:
                    any_nonfinite_grad = True
                    n = float("nan")
                elif n == 0.0:
                    s.zero_steps += 1
                s.grad_norms.append(n)
                if math.isfinite(n):
                    total_sq += n * n
            if s.stale:
                s.stale_steps.append(k)
            if self.history and len(s.grad_norms) > self.history:
                del s.grad_norms[0]
        self.global_grad_norms.append(math.sqrt(total_sq))
        if snapshot is not None:
            self.updates_measured = True
            self._measure_updates(snapshot, k)
        finite_loss = lval is None or math.isfinite(lval)
        forward_bad = any(e["out_finite"] is False for e in self._events)
        root_bad = any(e["out_finite"] is False for e in self._events if e["parent"] is None)
        if root_bad is False and self._events:
            self.model_output_finite[str(k)] = True
        if any_nonfinite_grad and self.auto_detail:
            self.detail = True  # locate the origin on the next observed step
        if self.nonfinite_step is None and (not finite_loss or any_nonfinite_grad):
            self.nonfinite_step = k
            self.nonfinite_index = self.steps_done
            if forward_bad and (not finite_loss or root_bad):
                self.forward_origin = self._find_forward_origin(k)
            elif any_nonfinite_grad and finite_loss:
                self.backward_origin = self._find_backward_origin(k)
        self.steps_done += 1
        ok = finite_loss and not any_nonfinite_grad
        self._events = []
        self._cache = {}
        return ok

    def _measure_updates(self, snapshot, k):
        idx = [i for i in range(len(self.params)) if snapshot[i] is not None]
        if not idx:
            return
        with torch.no_grad():
            olds = [snapshot[i] for i in idx]
            news = [self.params[i][1].detach() for i in idx]
            try:  # one fused pass per list where the torch build supports it
                diffs = torch._foreach_sub(news, olds)
                dns = [float(x) for x in torch._foreach_norm(diffs)]
                ons = [float(x) for x in torch._foreach_norm(olds)]
                del diffs
            except Exception:
                dns = [float(torch.linalg.vector_norm((n - o).float())) for n, o in zip(news, olds)]  # noqa: B905
                ons = [float(torch.linalg.vector_norm(o.float())) for o in olds]
        for j, i in enumerate(idx):
            s = self.pstats[i]
            on, dn = ons[j], dns[j]
            if s.init_rms is None:
                s.init_rms = on / math.sqrt(max(1, olds[j].numel()))
            if dn != 0.0:  # exactly unchanged <=> the difference is all zeros
                s.changed_steps.append(k)
            s.param_norms.append(on)
            s.update_ratios.append(dn / on if on > 0 else None)
            if self.history:
                for lst in (s.param_norms, s.update_ratios):
                    if len(lst) > self.history:
                        del lst[0]

    # ------------------------------------------------------------------ hooks

    def _finite_cached(self, t):
        key = id(t)
        hit = self._cache.get(key)
        ver = _version(t)
        if hit is not None and hit[0] is t and hit[1] == ver:
            return hit[2]
        res = tensor_finite(t)
        self._cache[key] = (t, ver, res)
        return res

    def _tree_finite(self, obj):
        return all(self._finite_cached(t) for t in _float_tensors(obj))

    def _pre(self, module, args, kwargs):
        if not self.active or self.paused:
            return None
        try:
            name = self.names.get(id(module), "?")
            if len(self._events) >= MAX_EVENTS:
                self._stack.append(None)
                return None
            parent = self._stack[-1] if self._stack else None
            idx = len(self._events)
            ev = {
                "name": name,
                "parent": parent,
                "depth": len(self._stack),
                "in_finite": self._tree_finite((args, kwargs)),
                "out_finite": None,
                "done": None,
                "in_grad_nf": None,
                "out_grad_nf": None,
                "out_grad_seen": False,
            }
            self._events.append(ev)
            self._stack.append(idx)
            if module is self.model:
                self._root_calls += 1
                if self._root_calls == 1 and self.steps_done == 0 and not self.inputs:
                    self._input_stats(args, kwargs)
            if self.detail and torch.is_grad_enabled():
                for t in _float_tensors((args, kwargs)):
                    if t.requires_grad and t.grad_fn is not None:
                        t.register_hook(self._grad_hook(idx, "in"))
        except Exception as exc:  # never break the user's forward
            self._internal(exc)
        return None

    def _post(self, module, args, kwargs, output):
        if not self.active or self.paused:
            return None
        try:
            idx = self._stack.pop() if self._stack else None
            if idx is None:
                return None
            ev = self._events[idx]
            name = ev["name"]
            ev["out_finite"] = self._tree_finite(output)
            ev["done"] = self._clock
            self._clock += 1
            self.calls[name] = self.calls.get(name, 0) + 1
            if name not in self.first_order:
                self.first_order[name] = self._order
                self._order += 1
            tname = type(module).__name__
            if tname in RELU_TYPES or tname in SAT_TYPES:
                self._activation(name, tname, output)
            if self.detail and torch.is_grad_enabled():
                for t in _float_tensors(output):
                    if t.requires_grad and t.grad_fn is not None:
                        t.register_hook(self._grad_hook(idx, "out"))
            if module is self.model:
                loss = extract_loss(output)
                if loss is not None:
                    self._loss_seen = loss
        except Exception as exc:
            self._internal(exc)
        return None

    def _grad_hook(self, idx, kind):
        def hook(grad):
            if not self.active_backward():
                return None
            try:
                t = self._bclock
                self._bclock += 1
                if idx >= len(self._events):
                    return None
                ev = self._events[idx]
                if kind == "out":
                    ev["out_grad_seen"] = True
                if not tensor_finite(grad):
                    key = "out_grad_nf" if kind == "out" else "in_grad_nf"
                    if ev[key] is None:
                        ev[key] = t
            except Exception as exc:
                self._internal(exc)
            return None

        return hook

    def active_backward(self):
        return self.active and not self.paused

    def _param_hook(self, i):
        def hook(grad):
            if not self.active or self.paused:
                return None
            try:
                s = self.pstats[i]
                p = self.params[i][1]
                if not s.fired and p.grad is not None and self.steps_done > 0:
                    with torch.no_grad():
                        if bool(p.grad.detach().ne(0).any()):
                            s.stale = True
                s.fired = True
                with torch.no_grad():
                    n = float(torch.linalg.vector_norm(grad.detach().float()))
                if not math.isfinite(n) and not tensor_finite(grad):
                    s.nonfinite = True
                    owner = self.owner[i]
                    if owner not in self._param_nf_t:
                        self._param_nf_t[owner] = self._bclock
                    self._bclock += 1
                else:
                    s.sumsq += n * n
            except Exception as exc:
                self._internal(exc)
            return None

        return hook

    def _internal(self, exc):
        if len(self.internal_errors) < 5:
            self.internal_errors.append(f"{type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------ statistics

    def _input_stats(self, args, kwargs):
        slots = [(f"arg{i}", a) for i, a in enumerate(args)]
        slots += [(k, v) for k, v in kwargs.items() if not any(w in k.lower() for w in SKIP_INPUT_WORDS)]
        with torch.no_grad():
            for slot, obj in slots:
                for j, t in enumerate(_float_tensors(obj)):
                    if t.numel() == 0 or t.is_complex():
                        continue
                    x = t.detach().float()
                    fin = torch.isfinite(x)
                    if not bool(fin.all()):
                        x = x[fin]
                    if x.numel() == 0:
                        continue
                    name = slot if j == 0 else f"{slot}[{j}]"
                    self.inputs.append(
                        {
                            "name": name,
                            "shape": list(t.shape),
                            "dtype": str(t.dtype).replace("torch.", ""),
                            "mean": round(float(x.mean()), 6),
                            "std": round(float(x.std()), 6) if x.numel() > 1 else 0.0,
                            "rms": round(float(x.pow(2).mean().sqrt()), 6),
                            "absmax": round(float(x.abs().max()), 6),
                        }
                    )
                    if len(self.inputs) >= 16:
                        return

    def _activation(self, name, tname, output):
        out = output if isinstance(output, torch.Tensor) else next(iter(_float_tensors(output)), None)
        if out is None or out.numel() == 0:
            return
        with torch.no_grad():
            y = out.detach()
            st = self.act.get(name)
            if tname in RELU_TYPES:
                unit_dim = 1 if y.dim() in (4, 5) else y.dim() - 1
                units = y.shape[unit_dim] if y.dim() > 0 else 1
                pos = (y > 0) if y.dim() > 0 else (y > 0).reshape(1)
                if y.dim() > 1:
                    pos = pos.movedim(unit_dim, -1).reshape(-1, units).any(0)
                obs = y.numel() // max(1, units)
                if st is None or st.get("units") != units:
                    st = {"kind": "relu", "units": units, "ever": pos.clone(), "obs": 0}
                    self.act[name] = st
                else:
                    st["ever"] |= pos
                st["obs"] += obs
            else:
                kind = SAT_TYPES[tname]
                yf = y.float()
                flat = (yf.abs() > 0.99) if kind == "tanh" else ((yf < 0.01) | (yf > 0.99))
                if st is None:
                    st = {"kind": kind, "sat": 0.0, "n": 0}
                    self.act[name] = st
                st["sat"] += float(flat.sum())
                st["n"] += y.numel()

    # ------------------------------------------------------------------ term gradients

    def term_gradients(self, terms):
        """Gradient norm each named loss term sends into the parameters it shares with other terms."""
        trainable = [(n, p) for n, p in self.params if p.requires_grad]
        if len(terms) < 2 or not trainable:
            return
        self.paused = True
        try:
            per_term = {}  # type: dict
            for name, term in terms.items():
                if not isinstance(term, torch.Tensor) or not term.requires_grad:
                    per_term[name] = [None] * len(trainable)
                    continue
                grads = torch.autograd.grad(
                    term, [p for _, p in trainable], retain_graph=True, allow_unused=True
                )
                per_term[name] = [None if g is None else g.detach() for g in grads]
            shared = [
                j
                for j in range(len(trainable))
                if sum(1 for g in per_term.values() if g[j] is not None and bool(g[j].ne(0).any())) >= 2
            ]
            self.shared_params = len(shared)
            if not shared:
                return
            for name, term_grads in per_term.items():
                sq = 0.0
                for j in shared:
                    g = term_grads[j]
                    if g is not None:
                        sq += float(torch.linalg.vector_norm(g.float())) ** 2
                self.term_grad_norms[name] = math.sqrt(sq)
        finally:
            self.paused = False

    # ------------------------------------------------------------------ origins

    def _find_forward_origin(self, k):
        evs = self._events
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
        origin = {"step": k, "module": name, "type": self.types.get(name), "kind": "module"}
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
        bad_params = [n for (n, p), o in zip(self.params, self.owner) if o == name and not tensor_finite(p)]  # noqa: B905
        if bad_params:
            origin["nonfinite_params"] = bad_params[:10]
        return origin

    def _find_backward_origin(self, k):
        evs = self._events
        best = None
        for i, e in enumerate(evs):
            if e["out_grad_nf"] is not None:
                continue  # the non-finite gradient arrived from outside this module
            times = [t for t in (e["in_grad_nf"], self._param_nf_t.get(e["name"])) if t is not None]
            if not times:
                continue
            key = (min(times), -e["depth"])
            if best is None or key < best[0]:
                best = (key, i)
        if best is None:
            roots = [e for e in evs if e["parent"] is None]
            if any(e["out_grad_nf"] is not None for e in roots):
                return self._loss_entry_origin(k)
            if self._param_nf_t:
                mod = min(self._param_nf_t, key=lambda m: self._param_nf_t[m])
                return {"step": k, "module": mod or None, "type": self.types.get(mod), "kind": "module"}
            return None
        e = evs[best[1]]
        bad = [n for (n, _p), o, s in zip(self.params, self.owner, self.pstats) if s.nonfinite]  # noqa: B905
        return {
            "step": k,
            "module": e["name"] or None,
            "type": self.types.get(e["name"]),
            "kind": "module",
            "nonfinite_param_grads": bad[:10],
        }

    def _loss_entry_origin(self, k):
        """The non-finite gradient came from outside the model (the loss code): name the first module
        it reaches in backward order (output gradient or parameter gradient; deepest on ties,
        the top-level module only when nothing below it received one)."""
        origin = {"step": k, "module": None, "kind": "loss", "entered_from": "loss function"}
        cands = []
        for e in self._events:
            times = [t for t in (e["out_grad_nf"], self._param_nf_t.get(e["name"])) if t is not None]
            if times:
                cands.append((e["parent"] is None, min(times), -e["depth"], e["name"]))
        if not cands:
            return origin
        is_root, _t, _d, name = min(cands)
        if not is_root and name:
            bad = [n for (n, _p), o, s in zip(self.params, self.owner, self.pstats) if s.nonfinite]  # noqa: B905
            origin.update({"module": name, "type": self.types.get(name), "nonfinite_param_grads": bad[:10]})
        return origin

    # ------------------------------------------------------------------ summary

    def summary(self, *, mode="loss_fn", fixed_batch=True):
        valid = self.steps_done if self.nonfinite_step is None else self.nonfinite_index
        params = []
        pbm = {}  # type: dict
        for i, (name, p) in enumerate(self.params[:MAX_PARAMS_REPORTED]):
            s = self.pstats[i]
            owner = self.owner[i]
            params.append(
                {
                    "name": name,
                    "module": owner,
                    "shape": list(p.shape),
                    "numel": p.numel(),
                    "ndim": p.dim(),
                    "dtype": str(p.dtype).replace("torch.", ""),
                    "requires_grad": bool(p.requires_grad),
                    "grad_norms": [_f(x) if x is not None else None for x in s.grad_norms],
                    "none_steps": s.none_steps,
                    "zero_steps": s.zero_steps,
                    "param_norms": [_f(x) for x in s.param_norms],
                    "update_ratios": [_f(x) if x is not None else None for x in s.update_ratios],
                    "changed_steps": s.changed_steps,
                    "stale_steps": s.stale_steps,
                    "init_rms": _f(s.init_rms) if s.init_rms is not None else None,
                    "in_optimizer": (id(p) in self.opt_ids) if self.optimizer is not None else None,
                    "lr": _f(self.opt_ids.get(id(p))) if self.optimizer is not None else None,
                }
            )
            if p.requires_grad:
                parts = name.split(".")
                for j in range(len(parts)):
                    pbm.setdefault(".".join(parts[:j]), []).append(name)
        modules = []
        for name, tname in self.types.items():
            row = {
                "name": name,
                "type": tname,
                "calls": self.calls.get(name, 0),
                "order": self.first_order.get(name),
            }
            st = self.act.get(name)
            if st is not None:
                row["act"] = st["kind"]
                if st["kind"] == "relu":
                    ever = st["ever"]
                    row["units"] = st["units"]
                    row["dead_fraction"] = round(1.0 - float(ever.float().mean()), 6)
                    row["act_obs"] = st["obs"]
                else:
                    row["saturated_fraction"] = round(st["sat"] / max(1, st["n"]), 6)
                    row["act_n"] = st["n"]
            modules.append(row)
        return {
            "mode": mode,
            "fixed_batch": fixed_batch,
            "steps": self.steps_done,
            "valid_steps": valid,
            "nonfinite_step": self.nonfinite_step,
            "losses": [_f(x) if x is not None else None for x in self.losses],
            "loss_terms": {k: [_f(x) for x in v] for k, v in self.loss_terms.items()},
            "global_grad_norms": [_f(x) for x in self.global_grad_norms],
            "forward_origin": self.forward_origin,
            "backward_origin": self.backward_origin,
            "model_output_finite": self.model_output_finite,
            "term_grad_norms": {k: _f(v) for k, v in self.term_grad_norms.items()},
            "shared_params": self.shared_params,
            "updates_measured": self.updates_measured,
            "inputs": self.inputs,
            "params": params,
            "params_by_module": pbm,
            "modules": modules,
            "internal_errors": self.internal_errors,
        }


def module_table(stats, limit=200):
    """Per-module rows: grad norm, param norm, update ratio, activation stats (bounded)."""
    steps = max(1, int(stats.get("valid_steps") or 0)) if stats.get("valid_steps") else 0
    acc = {}  # type: dict
    for p in stats.get("params", []):
        mod = p.get("module", "")
        row = acc.setdefault(
            mod, {"grad_sq": 0.0, "param_sq": 0.0, "upd": [], "numel": 0, "trainable": 0, "grad": False}
        )
        row["numel"] += p.get("numel", 0)
        if p.get("requires_grad"):
            row["trainable"] += p.get("numel", 0)
        norms = [rules._num(x) for x in (p.get("grad_norms") or [])[: steps or None]]
        norms = [x for x in norms if x is not None and math.isfinite(x)]
        if norms:
            row["grad"] = True
            row["grad_sq"] += (sum(norms) / len(norms)) ** 2
        pn = [rules._num(x) for x in (p.get("param_norms") or [])]
        pn = [x for x in pn if x is not None and math.isfinite(x)]
        if pn:
            row["param_sq"] += pn[0] ** 2
        ur = [rules._num(x) for x in (p.get("update_ratios") or [])]
        row["upd"] += [x for x in ur if x is not None and math.isfinite(x)]
    mods = {m["name"]: m for m in stats.get("modules", [])}
    rows = []
    for name, r in acc.items():
        m = mods.get(name, {})
        rows.append(
            {
                "module": name or "(model)",
                "type": m.get("type"),
                "order": m.get("order"),
                "params": r["numel"],
                "trainable": r["trainable"],
                "grad_norm": _f(math.sqrt(r["grad_sq"])) if r["grad"] else None,
                "param_norm": _f(math.sqrt(r["param_sq"])) if r["param_sq"] else None,
                "update_ratio": _f(sum(r["upd"]) / len(r["upd"])) if r["upd"] else None,
            }
        )
    for name, m in mods.items():
        if m.get("act") and name not in acc:
            rows.append(
                {
                    "module": name,
                    "type": m.get("type"),
                    "order": m.get("order"),
                    "dead_fraction": m.get("dead_fraction"),
                    "saturated_fraction": m.get("saturated_fraction"),
                }
            )
    rows.sort(key=lambda r: (r.get("order") is None, r.get("order") or 0))
    return rows[:limit]

"""What the probe observes to know the kind of training it watches (the regime). Torch and stdlib only.

A `RegimeWatch` rides along a `Recorder` and records, without changing anything the user computes:

- **every optimizer that steps** (global step hooks): its type and hyper-parameters, its parameters,
  whether it steps with a closure (L-BFGS), and which parameters received gradient in the backward
  passes before each of its steps (its own loss; another network's parameters reached by it);
- **the networks** (units: the model's top-level parts, or the observer's roots): whether they run
  with or without gradients, in training mode with dropout/batch norm active, and whether their
  frozen parameters change between steps (an EMA or target copy is updated without gradients);
- **what the user's code does to the weights after an optimizer step** and before the next forward
  (a `TorchFunctionMode` open only in that window): in-place writes from another network's weights
  (an EMA or a hard copy), a copy of a network into itself, arithmetic that reads a copy's weights
  and throws the result away;
- **the loss's autograd graph** at the first backward passes (`_ts_probe_graph`): log-probabilities
  weighted by returns or advantages, Gaussian KL terms and their sign;
- whether actions are **sampled** (`torch.multinomial`, what `Categorical.sample` calls).

`observations()` returns plain data for `_ts_probe_regimes` and the rules (stats["regime_obs"]).
The command form's probe plugin can drive the same class: `attach()`, `begin_step(k)`,
`forward_started()`, `inspect_loss(loss)`, `end_step(k)`, `detach()`.
"""

import torch
from torch.overrides import TorchFunctionMode

try:
    from . import _ts_probe_graph as graph
    from . import _ts_probe_tensors as tens
except ImportError:  # the runner's own folder (user's interpreter)
    import _ts_probe_graph as graph  # type: ignore[no-redef]
    import _ts_probe_tensors as tens  # type: ignore[no-redef]

INSPECT_BACKWARDS = 6  # loss graphs read, in the first two steps
HYPER_KEYS = ("lr", "momentum", "nesterov", "dampening", "weight_decay", "betas", "alpha", "eps",
              "lr_decay", "initial_accumulator_value", "rho", "max_iter", "line_search_fn", "amsgrad")  # fmt: skip
# arithmetic that updates a copy of a network (EMA, Polyak averaging, hard copies)
UPDATE_OPS = {"mul", "add", "sub", "lerp", "div", "addcmul", "addcdiv", "copy", "mul_", "add_", "sub_",
              "lerp_", "div_", "addcmul_", "addcdiv_", "copy_", "set_", "zero_", "fill_",
              "_foreach_mul_", "_foreach_add_", "_foreach_lerp_", "_foreach_copy_", "_foreach_sub_",
              "_foreach_mul", "_foreach_add", "_foreach_lerp", "_foreach_addcmul_", "__mul__", "__add__",
              "__rmul__", "__radd__", "__sub__", "__iadd__", "__imul__", "__isub__"}  # fmt: skip
MODE_LAYERS = ("Dropout", "BatchNorm", "SyncBatchNorm", "AlphaDropout")


def units_of(model):
    """The separate networks an entrypoint's model holds: the children of a container with no weights
    of its own (`nn.ModuleDict({"netG": ..., "netD": ...})`, a BYOL learner), else the model itself."""
    own = any(True for _ in model.parameters(recurse=False))
    kids = [(n, m) for n, m in model.named_children() if any(True for _ in m.parameters())]
    if not own and len(kids) >= 2:
        return kids
    return [("", model)]


def _active_mode_layers(module, prefix):
    out = []
    for name, m in module.named_modules():
        tname = type(m).__name__
        if not m.training or not any(k in tname for k in MODE_LAYERS):
            continue
        if "Dropout" in tname and not getattr(m, "p", 0):
            continue
        if "BatchNorm" in tname and not getattr(m, "track_running_stats", True):
            continue
        full = f"{prefix}.{name}" if prefix and name else (prefix or name)
        out.append(f"{full} ({tname})")
    return out


def _tensors(obj, depth=0):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)) and depth < 2:
        for x in obj[:4096]:
            yield from _tensors(x, depth + 1)


def _ptr(t):
    try:
        if t.layout != torch.strided or t.device.type == "meta":
            return None
        return t.data_ptr()
    except Exception:
        return None


class _AfterStep(TorchFunctionMode):
    """Sees the torch operations of the user's code between an optimizer step and the next forward."""

    def __init__(self, watch):
        super().__init__()
        self.watch = watch

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            self.watch._op(func, args, kwargs)
        except Exception as exc:  # observing must never break the user's code
            self.watch.rec.internal(exc)
        return func(*args, **kwargs)


class RegimeWatch:
    def __init__(self, rec, units=None, after_step=True):
        self.rec = rec
        self.units = list(units) if units is not None else units_of(rec.model)
        self.after_step_enabled = after_step
        self.all_params = []  # (name, tensor) of every parameter, frozen ones included
        seen = set()
        for name, p in rec.model.named_parameters():
            if id(p) not in seen:
                seen.add(id(p))
                self.all_params.append((name, p))
        self.names = {id(p): n for n, p in self.all_params}
        self.index = {n: i for i, (n, _) in enumerate(rec.params)}
        self.optimizers = {}  # id(opt) -> record
        self._opt_order = []
        self._last_fires = [0] * len(rec.params)
        self.unit_calls = {label: {"grad": 0, "no_grad": 0, "train_active": None} for label, _ in self.units}
        self._unit_of_module = {id(m): label for label, m in self.units}
        self.frozen = [(n, p) for n, p in self.all_params if not p.requires_grad]
        self.frozen_changed = {}  # name -> [steps]
        self._prints = None
        self.graphs = []
        self.sampled = 0
        self.sparse_grads = set()
        self.after = {"windows": 0, "written": {}, "sources": {}, "read": {}, "self_copy": set()}
        self._window = None
        self._window_writes = set()
        self._ptrs = {}
        self.step = -1
        self.handles = []
        self._patched = []

    # ------------------------------------------------------------------ attach / detach

    def attach(self):
        from torch.optim import optimizer as optim_mod

        self.handles.append(optim_mod.register_optimizer_step_pre_hook(self._step_pre))
        self.handles.append(optim_mod.register_optimizer_step_post_hook(self._step_post))
        for label, module in self.units:
            self.handles.append(module.register_forward_pre_hook(self._unit_pre(label), prepend=True))
        self._patch(torch.autograd, "backward", self._backward_wrapper)
        self._patch(torch, "multinomial", self._sampling_wrapper)
        return self

    def detach(self):
        self.close_window()
        for h in self.handles:
            h.remove()
        self.handles = []
        for owner, attr, original in reversed(self._patched):
            setattr(owner, attr, original)
        self._patched = []

    def _patch(self, owner, attr, make):
        original = getattr(owner, attr)
        wrapper = make(original)
        wrapper.__wrapped__ = original
        setattr(owner, attr, wrapper)
        self._patched.append((owner, attr, original))

    def _backward_wrapper(self, original):
        watch = self

        def backward(tensors, *args, **kwargs):
            if watch.step <= 1 and len(watch.graphs) < INSPECT_BACKWARDS:
                t = tensors[0] if isinstance(tensors, (list, tuple)) and len(tensors) == 1 else tensors
                if isinstance(t, torch.Tensor) and t.numel() == 1:
                    watch.inspect_loss(t)
            return original(tensors, *args, **kwargs)

        return backward

    def _sampling_wrapper(self, original):
        watch = self

        def multinomial(*args, **kwargs):
            watch.sampled += 1
            return original(*args, **kwargs)

        return multinomial

    # ------------------------------------------------------------------ events

    def inspect_loss(self, loss):
        """Read the graph of a scalar loss before its backward (the graph is still there)."""
        try:
            self.graphs.append(graph.inspect(loss, self.names))
        except Exception as exc:
            self.rec.internal(exc)

    def begin_step(self, k):
        self.step = k
        self._last_fires = [0] * len(self.rec.params)
        if self._prints is None:
            self._prints = self._fingerprints()

    def end_step(self, k):
        self.close_window()
        self._note_sparse()
        prints = self._fingerprints()
        if self._prints is not None and prints is not None:
            for (name, _), old, new in zip(self.frozen, self._prints, prints):  # noqa: B905
                if old != new:
                    self.frozen_changed.setdefault(name, []).append(k)
        self._prints = prints

    def forward_started(self):
        self.close_window()

    def _unit_pre(self, label):
        def hook(module, args):
            try:
                self.close_window()
                rec = self.unit_calls[label]
                if torch.is_grad_enabled():
                    rec["grad"] += 1
                else:
                    rec["no_grad"] += 1
                    if rec["train_active"] is None:
                        rec["train_active"] = _active_mode_layers(module, label)
            except Exception as exc:
                self.rec.internal(exc)
            return None

        return hook

    def _step_pre(self, optimizer, args, kwargs):
        try:
            rec = self.optimizers.get(id(optimizer))
            if rec is None or rec["ref"] is not optimizer:
                rec = self._new_optimizer(optimizer)
            rec["steps"] += 1
            if any(callable(a) for a in args[1:2]) or kwargs.get("closure") is not None:  # args[0] is the optimizer
                rec["closure_steps"] += 1
            fired = []
            for i, s in enumerate(self.rec.pstats):
                if s.fires > self._last_fires[i]:
                    fired.append(i)
                self._last_fires[i] = s.fires
            own = [i for i in fired if i in rec["members"]]
            if own:
                rec["own_backward_steps"] += 1
            for i in fired:
                if i not in rec["members"]:
                    rec["reached_other"].add(self.rec.params[i][0])
            self._note_sparse()
        except Exception as exc:
            self.rec.internal(exc)
        return None

    def _step_post(self, optimizer, args, kwargs):
        if self.after_step_enabled:
            self.open_window()

    def _new_optimizer(self, optimizer):
        members = set()
        for g in optimizer.param_groups:
            for p in g["params"]:
                name = self.names.get(id(p))
                if name is not None and name in self.index:
                    members.add(self.index[name])
        hyper = {}
        group = optimizer.param_groups[0] if optimizer.param_groups else {}
        for key in HYPER_KEYS:
            value = group.get(key)
            if isinstance(value, (bool, int, float, str)) or value is None:
                hyper[key] = value
            elif isinstance(value, (tuple, list)) and all(isinstance(v, (int, float)) for v in value):
                hyper[key] = list(value)
            elif isinstance(value, torch.Tensor) and value.numel() == 1:
                hyper[key] = float(value)
        rec = {
            "ref": optimizer,
            "index": len(self._opt_order),
            "type": type(optimizer).__name__,
            "hyper": hyper,
            "members": members,
            "steps": 0,
            "closure_steps": 0,
            "own_backward_steps": 0,
            "reached_other": set(),
        }
        self.optimizers[id(optimizer)] = rec
        self._opt_order.append(rec)
        return rec

    def _note_sparse(self):
        for name, p in self.rec.params:
            g = p.grad
            if g is not None and g.layout != torch.strided:
                self.sparse_grads.add(name)

    def _fingerprints(self):
        if not self.frozen:
            return None
        try:
            with torch.no_grad():
                ps = [p.detach() for _, p in self.frozen]
                norms = torch.stack([n.float() for n in torch._foreach_norm(ps)]).tolist()
                sums = torch.stack([p.sum().float() for p in ps]).tolist()
            return list(zip(norms, sums))  # noqa: B905
        except Exception as exc:
            self.rec.internal(exc)
            return None

    # ------------------------------------------------------------------ the window after a step

    def open_window(self):
        if self._window is not None:
            return
        try:
            self._ptrs = {}
            for name, p in self.all_params:
                ptr = _ptr(p)
                if ptr is not None:
                    self._ptrs[ptr] = name
            self._window = _AfterStep(self)
            self._window.__enter__()
            self._window_writes = set()
            self.after["windows"] += 1
        except Exception as exc:
            self._window = None
            self.rec.internal(exc)

    def close_window(self):
        mode = self._window
        if mode is None:
            return
        self._window = None
        try:
            if torch.overrides._get_current_function_mode() is mode:
                mode.__exit__(None, None, None)
            else:  # another mode was entered above ours and left open: leave the stack alone
                mode.watch = _Inert()
                self.rec.internal(RuntimeError("the after-step window could not be closed in order"))
        except Exception as exc:
            self.rec.internal(exc)

    def _op(self, func, args, kwargs):
        name = getattr(func, "__name__", "")
        if name not in UPDATE_OPS or self.rec.paused:
            return
        inplace = name.endswith("_") and not name.endswith("__") or name.startswith("__i")
        first = list(_tensors(args[0])) if args else []
        rest = [t for a in list(args[1:]) + list(kwargs.values()) for t in _tensors(a)]
        first_names = [self._ptrs.get(_ptr(t)) for t in first]
        rest_ptrs = {_ptr(t) for t in rest}
        rest_names = {self._ptrs.get(p) for p in rest_ptrs} - {None}
        if inplace:
            for t, n in zip(first, first_names):  # noqa: B905
                if n is None:
                    continue
                self.after["written"][n] = self.after["written"].get(n, 0) + (n not in self._window_writes)
                self._window_writes.add(n)
                if _ptr(t) in rest_ptrs and name.startswith("copy"):
                    self.after["self_copy"].add(n)
                srcs = self.after["sources"].setdefault(n, set())
                srcs |= rest_names - {n}
        else:
            for n in first_names + sorted(rest_names):
                if n is not None:
                    self.after["read"][n] = self.after["read"].get(n, 0) + 1

    # ------------------------------------------------------------------ the record

    def discover_optimizers(self):
        """Optimizers that hold the model's parameters but never stepped (a discriminator whose step is
        missing): found among live objects once, at the end, when no step hook could see them."""
        import gc

        base = torch.optim.Optimizer
        try:
            for obj in gc.get_objects():
                # type(), not isinstance(): no __class__ lookup on lazy proxies (which warn)
                if issubclass(type(obj), base) and id(obj) not in self.optimizers:
                    rec = self._new_optimizer(obj)
                    if not rec["members"]:
                        del self.optimizers[id(obj)]
                        self._opt_order.remove(rec)
                        for i, r in enumerate(self._opt_order):
                            r["index"] = i
        except Exception as exc:
            self.rec.internal(exc)

    def observations(self):
        self.discover_optimizers()
        params = self.rec.params
        optimizers = []
        param_opt = {}
        for rec in self._opt_order:
            names = [params[i][0] for i in sorted(rec["members"])]
            for n in names:
                param_opt.setdefault(n, []).append(rec["index"])
            optimizers.append(
                {
                    "index": rec["index"],
                    "type": rec["type"],
                    "hyper": rec["hyper"],
                    "n_params": len(names),
                    "params": names[:200],
                    "steps": rec["steps"],
                    "closure_steps": rec["closure_steps"],
                    "own_backward_steps": rec["own_backward_steps"],
                    "reached_other": sorted(rec["reached_other"])[:200],
                }
            )
        units = []
        for label, module in self.units:
            prefix = label + "." if label else ""
            names = [n for n, _ in self.all_params if n.startswith(prefix)]
            calls = self.unit_calls[label]
            units.append(
                {
                    "label": label,
                    "type": type(module).__name__,
                    "params": names[:500],
                    "n_params": len(names),
                    "shapes": [list(p.shape) for n, p in self.all_params if n.startswith(prefix)][:500],
                    "trainable": [n for n, p in self.all_params if n.startswith(prefix) and p.requires_grad][:500],
                    "grad_calls": calls["grad"],
                    "no_grad_calls": calls["no_grad"],
                    "train_active_without_grad": calls["train_active"] or [],
                }
            )
        merged = _merge_graphs(self.graphs)
        after = self.after
        return {
            "optimizers": optimizers,
            "param_optimizers": param_opt,
            "units": units,
            "frozen_changed": {n: s for n, s in self.frozen_changed.items()},
            "frozen": [n for n, _ in self.frozen][:1000],
            "after_step": {
                "windows": after["windows"],
                "written": dict(after["written"]),
                "sources": {n: sorted(s) for n, s in after["sources"].items()},
                "read": dict(after["read"]),
                "self_copy": sorted(after["self_copy"]),
            },
            "graph": merged,
            "sampled": self.sampled,
            "sparse_grads": sorted(self.sparse_grads),
        }


class _Inert:
    rec = None

    def _op(self, *a):
        return None


def _merge_graphs(graphs):
    out = {"inspected": len(graphs), "pg_terms": 0, "pg_constant": 0, "pg_with_grad": 0,
           "pg_weight_min": None, "pg_weight_max": None, "pg_weight_only_params": [],
           "pg_logprob_params": [], "kl_terms": [], "truncated": False}  # fmt: skip
    only, logp = set(), set()
    seen_kl = set()
    for g in graphs:
        for key in ("pg_terms", "pg_constant", "pg_with_grad"):
            out[key] += g.get(key, 0)
        out["truncated"] = out["truncated"] or g.get("truncated", False)
        if g.get("pg_weight_min") is not None:
            lo, hi = out["pg_weight_min"], out["pg_weight_max"]
            out["pg_weight_min"] = g["pg_weight_min"] if lo is None else min(lo, g["pg_weight_min"])
            out["pg_weight_max"] = g["pg_weight_max"] if hi is None else max(hi, g["pg_weight_max"])
        only |= set(g.get("pg_weight_only_params", []))
        logp |= set(g.get("pg_logprob_params", []))
        for term in g.get("kl_terms", []):
            key = (term["form"], term["sign"], tuple(term["variance_params"]), tuple(term["mean_params"]))
            if key not in seen_kl:
                seen_kl.add(key)
                out["kl_terms"].append(term)
    out["pg_weight_only_params"] = sorted(only - logp)
    out["pg_logprob_params"] = sorted(logp)[:50]
    return out


__all__ = ["RegimeWatch", "tens", "units_of"]

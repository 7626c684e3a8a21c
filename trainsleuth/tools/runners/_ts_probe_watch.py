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
except ImportError:  # the runner's own folder (user's interpreter)
    import _ts_probe_graph as graph  # type: ignore[no-redef]

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
    """Observations for the regime. Parameters are tracked by identity and named at the end
    (`observations(name_of)`), so the command form can name them as its merged statistics do.

    `units`: [(label, module)]; `fires()`: {id(param): backward passes that reached it this step};
    `internal(exc)`: where an exception of the watch goes (it never reaches the user's code)."""

    def __init__(self, units, fires=None, internal=None, after_step=True):
        self.handles = []
        self._attached = False
        self.units = []
        self._unit_ids = set()
        self.params = {}  # id(param) -> param, every parameter of every unit, frozen ones included
        self.unit_calls = {}
        for label, module in units:
            self.add_unit(label, module)
        self.fires = fires or _no_fires
        self.internal = internal or (lambda exc: None)
        self.after_step_enabled = after_step
        self.optimizers = {}  # id(opt) -> record
        self._opt_order = []
        self._last_fires = {}
        self.frozen_changed = {}  # id(param) -> [steps]
        self._prints = None
        self._frozen_ids = None
        self.graphs = []
        self.sampled = 0
        self.sparse_grads = set()
        self.got_grad = set()  # parameters seen with a .grad (the command form watches only held ones)
        self.windows = 0  # after-step windows opened
        self.written = {}  # type: dict  # id(param) -> windows in which the code wrote it in place
        self.sources = {}  # type: dict  # id(param) -> ids of the parameters it was written from
        self.reads = {}  # type: dict  # id(param) -> reads by arithmetic that wrote nothing
        self.self_copy = set()  # type: set  # parameters copied into themselves
        self.default_names = {}  # type: dict
        self._window = None
        self._window_writes = set()
        self._ptrs = {}
        self.step = -1
        self._patched = []

    @classmethod
    def for_recorder(cls, rec, after_step=True):
        """The entrypoint probe's watch: the model's parts are the units, the recorder counts backwards."""

        def fires():
            return {id(p): s.fires for (_, p), s in zip(rec.params, rec.pstats)}  # noqa: B905

        watch = cls(units_of(rec.model), fires=fires, internal=rec.internal, after_step=after_step)
        names = {}  # type: dict
        for name, p in rec.model.named_parameters():
            names.setdefault(id(p), name)
        watch.default_names = names
        return watch

    def add_unit(self, label, module):
        """A network to watch (the command form adds the observer's roots as they appear)."""
        if id(module) in self._unit_ids:
            return
        self._unit_ids.add(id(module))
        self.units.append((label, module))
        self.unit_calls[label] = {"grad": 0, "no_grad": 0, "train_active": None}
        for p in module.parameters():
            self.params.setdefault(id(p), p)
        self._frozen_ids = None
        if self._attached:
            self.handles.append(module.register_forward_pre_hook(self._unit_pre(label), prepend=True))

    # ------------------------------------------------------------------ attach / detach

    def attach(self):
        from torch.optim import optimizer as optim_mod

        self.handles.append(optim_mod.register_optimizer_step_pre_hook(self._step_pre))
        self.handles.append(optim_mod.register_optimizer_step_post_hook(self._step_post))
        for label, module in self.units:
            self.handles.append(module.register_forward_pre_hook(self._unit_pre(label), prepend=True))
        self._patch(torch.autograd, "backward", self._backward_wrapper)
        self._patch(torch, "multinomial", self._sampling_wrapper)
        self._attached = True
        return self

    def detach(self):
        self.close_window()
        for h in self.handles:
            h.remove()
        self.handles = []
        for owner, attr, original in reversed(self._patched):
            setattr(owner, attr, original)
        self._patched = []
        self._attached = False

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
        if len(self.graphs) >= INSPECT_BACKWARDS or getattr(loss, "grad_fn", None) is None:
            return
        try:
            self.graphs.append(graph.inspect(loss, {k: k for k in self.params}))
        except Exception as exc:
            self.internal(exc)

    def begin_step(self, k):
        self.step = k
        self._last_fires = {}
        if self._prints is None:
            self._prints = self._fingerprints()

    def end_step(self, k):
        self.close_window()
        self._note_sparse()
        prints = self._fingerprints()
        if self._prints is not None and prints is not None:
            for pid, new in prints.items():
                old = self._prints.get(pid)
                if old is not None and old != new:
                    self.frozen_changed.setdefault(pid, []).append(k)
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
                self.internal(exc)
            return None

        return hook

    def _step_pre(self, optimizer, args, kwargs):
        self.close_window()
        try:
            rec = self.optimizers.get(id(optimizer))
            if rec is None or rec["ref"] is not optimizer:
                rec = self._new_optimizer(optimizer)
            if len(rec["members"]) < rec["n_held"]:  # units added since (the command form's roots)
                rec["members"] = self._members(optimizer)
            rec["steps"] += 1
            if (
                any(callable(a) for a in args[1:2]) or kwargs.get("closure") is not None
            ):  # args[0]: the optimizer
                rec["closure_steps"] += 1
            fired = []
            for pid, n in self.fires().items():
                if n > self._last_fires.get(pid, 0):
                    fired.append(pid)
                self._last_fires[pid] = n
            if any(pid in rec["members"] for pid in fired):
                rec["own_backward_steps"] += 1
            rec["reached_other"].update(pid for pid in fired if pid not in rec["members"])
            self._note_sparse()
        except Exception as exc:
            self.internal(exc)
        return None

    def _step_post(self, optimizer, args, kwargs):
        if self.after_step_enabled:
            self.open_window()

    def _members(self, optimizer):
        return {id(p) for g in optimizer.param_groups for p in g["params"] if id(p) in self.params}

    def _new_optimizer(self, optimizer):
        members = self._members(optimizer)
        hyper = {}  # type: dict
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
            "type": type(optimizer).__name__,
            "hyper": hyper,
            "members": members,
            "n_held": sum(len(g["params"]) for g in optimizer.param_groups),
            "steps": 0,
            "closure_steps": 0,
            "own_backward_steps": 0,
            "reached_other": set(),
        }
        self.optimizers[id(optimizer)] = rec
        self._opt_order.append(rec)
        self._frozen_ids = None  # what no optimizer holds has changed
        return rec

    def _note_sparse(self):
        for pid, p in self.params.items():
            g = p.grad
            if g is None:
                continue
            self.got_grad.add(pid)
            if g.layout != torch.strided:
                self.sparse_grads.add(pid)

    def _fingerprints(self):
        """(norm, sum) of every parameter no optimizer step measures: frozen ones, and ones in no optimizer
        seen so far (a copy updated without gradients, a network left out of every optimizer)."""
        if self._frozen_ids is None:
            held = set().union(*(r["members"] for r in self._opt_order)) if self._opt_order else set()
            self._frozen_ids = [
                pid for pid, p in self.params.items() if not p.requires_grad or pid not in held
            ]
        if not self._frozen_ids:
            return None
        try:
            with torch.no_grad():
                ps = [self.params[pid].detach() for pid in self._frozen_ids]
                norms = torch.stack([n.float().reshape(()) for n in torch._foreach_norm(ps)]).tolist()
                sums = torch.stack([p.sum().float() for p in ps]).tolist()
            return dict(zip(self._frozen_ids, zip(norms, sums)))  # noqa: B905
        except Exception as exc:
            self.internal(exc)
            return None

    def discover_optimizers(self):
        """Optimizers that hold the watched parameters but never stepped (a discriminator whose step is
        missing): found among live objects once, at the end, when no step hook could see them."""
        import gc

        base = torch.optim.Optimizer
        try:
            for obj in gc.get_objects():
                # type(), not isinstance(): no __class__ lookup on lazy proxies (which warn)
                if (
                    issubclass(type(obj), base)
                    and id(obj) not in self.optimizers
                    and any(id(p) in self.params for g in obj.param_groups for p in g["params"])
                ):
                    self._new_optimizer(obj)
        except Exception as exc:
            self.internal(exc)

    # ------------------------------------------------------------------ the window after a step

    def open_window(self):
        if self._window is not None:
            return
        try:
            self._ptrs = {}
            for pid, p in self.params.items():
                ptr = _ptr(p)
                if ptr is not None:
                    self._ptrs[ptr] = pid
            self._window = _AfterStep(self)
            self._window.__enter__()
            self._window_writes = set()
            self.windows += 1
        except Exception as exc:
            self._window = None
            self.internal(exc)

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
                self.internal(RuntimeError("the after-step window could not be closed in order"))
        except Exception as exc:
            self.internal(exc)

    def _op(self, func, args, kwargs):
        name = getattr(func, "__name__", "")
        if name not in UPDATE_OPS:
            return
        inplace = (name.endswith("_") and not name.endswith("__")) or name.startswith("__i")
        first = list(_tensors(args[0])) if args else []
        rest = [t for a in list(args[1:]) + list(kwargs.values()) for t in _tensors(a)]
        first_ids = [self._ptrs.get(_ptr(t)) for t in first]
        rest_ptrs = {_ptr(t) for t in rest}
        rest_ids = {self._ptrs.get(p) for p in rest_ptrs} - {None}
        if inplace:
            for t, pid in zip(first, first_ids):  # noqa: B905
                if pid is None:
                    continue
                if pid not in self._window_writes:
                    self.written[pid] = self.written.get(pid, 0) + 1
                    self._window_writes.add(pid)
                if _ptr(t) in rest_ptrs and name.startswith("copy"):
                    self.self_copy.add(pid)
                self.sources.setdefault(pid, set()).update(rest_ids - {pid})
        else:
            for pid in [x for x in first_ids if x is not None] + list(rest_ids):
                self.reads[pid] = self.reads.get(pid, 0) + 1

    # ------------------------------------------------------------------ the record

    def observations(self, name_of=None, prefixes=None):
        """Plain data for `_ts_probe_regimes`: `name_of` maps id(param) -> its name in the statistics
        record, `prefixes` each unit label -> the prefix of its parameters' names there."""
        self.discover_optimizers()
        default = getattr(self, "default_names", {})
        name_of = name_of or default
        prefixes = prefixes or {}

        def nm(pid):
            return name_of.get(pid) or default.get(pid) or f"?{pid}"

        def names(ids):
            return sorted({nm(pid) for pid in ids})

        optimizers = []
        param_opt = {}  # type: dict
        for i, rec in enumerate(self._opt_order):
            if rec["ref"] is not None and len(rec["members"]) < rec["n_held"]:
                rec["members"] = self._members(rec["ref"])
            member_names = [nm(pid) for pid in rec["members"]]
            for n in member_names:
                param_opt.setdefault(n, []).append(i)
            optimizers.append(
                {
                    "index": i,
                    "type": rec["type"],
                    "hyper": rec["hyper"],
                    "n_params": len(member_names),
                    "outside_units": max(0, rec["n_held"] - len(member_names)),
                    "params": sorted(member_names)[:500],
                    "steps": rec["steps"],
                    "closure_steps": rec["closure_steps"],
                    "own_backward_steps": rec["own_backward_steps"],
                    "reached_other": names(rec["reached_other"])[:500],
                }
            )
        units = []
        for label, module in self.units:
            ps = list(module.parameters())
            calls = self.unit_calls[label]
            units.append(
                {
                    "label": label,
                    "prefix": prefixes.get(label, label + "." if label else ""),
                    "type": type(module).__name__,
                    "params": [nm(id(p)) for p in ps][:500],
                    "n_params": len(ps),
                    "shapes": [list(p.shape) for p in ps][:500],
                    "trainable": [nm(id(p)) for p in ps if p.requires_grad][:500],
                    "grad_calls": calls["grad"],
                    "no_grad_calls": calls["no_grad"],
                    "train_active_without_grad": calls["train_active"] or [],
                }
            )
        return {
            "optimizers": optimizers,
            "param_optimizers": param_opt,
            "units": units,
            "frozen_changed": {nm(pid): s for pid, s in self.frozen_changed.items()},
            "frozen": names(pid for pid, p in self.params.items() if not p.requires_grad)[:1000],
            "after_step": {
                "windows": self.windows,
                "written": {nm(pid): n for pid, n in self.written.items()},
                "sources": {nm(pid): names(s) for pid, s in self.sources.items()},
                "read": {nm(pid): n for pid, n in self.reads.items()},
                "self_copy": names(self.self_copy),
            },
            "graph": _merge_graphs(self.graphs, nm),
            "sampled": self.sampled,
            "sparse_grads": names(self.sparse_grads),
            "got_grad": names(self.got_grad)[:2000],
        }


def _no_fires():
    return {}


class _Inert:
    rec = None

    def _op(self, *a):
        return None


def _merge_graphs(graphs, nm):
    """One record from the graphs read (their parameters are ids until named here)."""
    out = {"inspected": len(graphs), "pg_terms": 0, "pg_constant": 0, "pg_with_grad": 0,
           "pg_weight_min": None, "pg_weight_max": None, "pg_weight_only_params": [],
           "pg_logprob_params": [], "kl_terms": [], "truncated": False}  # type: dict  # fmt: skip
    only, logp = set(), set()  # type: set, set
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
            term = dict(
                term,
                variance_params=sorted(nm(p) for p in term["variance_params"]),
                mean_params=sorted(nm(p) for p in term["mean_params"]),
            )
            kl_key = (term["form"], term["sign"], tuple(term["variance_params"]), tuple(term["mean_params"]))
            if kl_key not in seen_kl:
                seen_kl.add(kl_key)
                out["kl_terms"].append(term)
    out["pg_weight_only_params"] = sorted(nm(p) for p in only - logp)
    out["pg_logprob_params"] = sorted(nm(p) for p in logp)[:50]
    return out


__all__ = ["RegimeWatch", "units_of"]

"""The differential tracer: a plugin of the observer (`_ts_observe.py`). Torch and the standard library only.

`trace_diff` runs two variants of the user's training (two commits, two environments, two
commands) under this plugin and aligns the two traces. To make the variants comparable the tracer
pins randomness at `import torch`: it seeds torch, `random` and numpy, turns deterministic
algorithms on (warn only) and replaces the seed the user's code passes to `torch.manual_seed`,
`random.seed` or `numpy.random.seed` by a fixed one (the n-th call of each gets base + n), so two
seeds of the same code train identically and the seeds given are only noted.

It records, with the user's call site (`file:line in function`, workspace-relative) and the step:
- API calls: `torch.nn.init.*`, `torch.nn.utils.*` (spectral_norm, weight_norm, clip_grad_*,
  parametrize), `Module.train()/eval()`, `torch.compile`, `load_state_dict`, optimizer construction
  and `zero_grad`, `torch.distributed` collectives (result on return), seeds;
- in-place writes to a parameter or buffer outside the optimizer's step (`w.data.normal_()`);
- each outermost model call (site, train/eval mode, output summary) and, per call, each submodule's
  output summary; the loss of each backward;
- per optimizer step, each parameter's gradient, value after the step and whether the step changed
  it; at the end of each step, buffers and parameters no optimizer stepped;
- in the first `ops_steps` steps (and the set-up before them), every tensor operation through a
  TorchFunctionMode: its name, the module it ran in, its non-tensor arguments and an output summary,
  so a value difference can be localised below the module (stopped when `torch.compile` is called).
A tensor is never stored: see `_ts_trace_stats.summarise`. The trace is bounded (events per step and
in all); what was left out is counted.
"""

import os
import random
import sys
import threading
import weakref

import _ts_observe as core
import _ts_trace_api as api
import _ts_trace_stats as st

MAX_EVENTS = 40000
MAX_OPS_PER_STEP = 2500
MAX_WRITES_PER_STEP = 400
MAX_ROOT_CALLS_PER_STEP = 8
CLONE_LIMIT = 20_000_000  # parameter elements: below this, updates are measured exactly (a copy is kept)
WRAPPERS = {"DistributedDataParallel", "DataParallel", "OptimizedModule", "FullyShardedDataParallel"}
NAME_WRAPPERS = {"module", "_orig_mod", "_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_forward_module"}
VIEW_OPS = {
    "view", "reshape", "view_as", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze", "expand",
    "expand_as", "t", "transpose", "permute", "contiguous", "detach", "detach_", "to", "cpu", "cuda",
    "type", "float", "double", "half", "bfloat16", "clone", "__getitem__", "split", "chunk", "unbind",
    "narrow", "select", "as_strided", "requires_grad_", "retain_grad", "numpy", "tolist", "item",
    "__get__", "__set__", "size", "dim", "numel", "stride", "is_contiguous", "data_ptr",
    "untyped_storage", "storage_offset", "element_size", "is_floating_point", "is_complex",
    "__len__", "__iter__", "__bool__", "__repr__", "__format__", "__hash__", "__index__", "__int__",
    "__float__", "__reduce_ex__", "__deepcopy__", "__setstate__", "share_memory_", "pin_memory",
    "_is_view", "is_leaf", "grad_fn", "__contains__", "dtype", "device", "shape", "ndim",
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
}  # fmt: skip
_C_MODULES = {"torch._C._nn": "F", "torch._C._VariableFunctions": "torch", "torch._C._linalg": "torch.linalg",
              "torch._C._fft": "torch.fft", "torch._C._special": "torch.special"}  # fmt: skip


def make(observer, options):
    return Tracer(observer, options)


def _quiet(method):
    """The tracer's own torch calls (summaries, copies) are not the user's: nothing inside is recorded."""

    def run(self, *args, **kwargs):
        self._busy += 1
        try:
            return method(self, *args, **kwargs)
        finally:
            self._busy -= 1

    run.__name__ = method.__name__
    run.__doc__ = method.__doc__
    return run


def _norm_name(name):
    parts = [p for p in name.split(".") if p not in NAME_WRAPPERS]
    return ".".join(parts)


def _differs(a, b):
    try:
        return bool(a != b)
    except Exception:
        return a is not b


def _ptr(t):
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        return None


class Tracer:
    def __init__(self, observer, options):
        self.obs = observer
        self.torch = None
        self.seed = int(options.get("seed", 1234))
        self.pin_seeds = bool(options.get("pin_seeds", True))
        self.deterministic = bool(options.get("deterministic", True))
        self.ops_steps = max(0, int(options.get("ops_steps", 1)))
        self.max_events = int(options.get("max_events", MAX_EVENTS))
        guard = observer.config.get("guard") or {}
        self._prefixes = [p.rstrip(os.sep) + os.sep for p in (guard.get("mirror"), guard.get("workspace")) if p]
        self.events = []
        self.seq = 0
        self.dropped = {}
        self.notes = []
        self.seeds = []
        self._busy = 0
        self._tid = threading.get_ident()
        self._pid = os.getpid()
        self._in_step = False
        self._trained = False
        self._ops_off = self.ops_steps == 0
        self._mode = None
        self._hooks = []
        self._stack = []  # (module, id) of the forwards that are running
        self._root_calls = 0
        self._fwd = {}  # (k, root call, id(module), training) -> event
        self._per_step = {}  # (k, kind) -> count
        self._storages = {}  # storage ptr -> weakref(tensor): parameters and buffers
        self._before = {}  # id(param) -> (stats, clone or None) at before_step
        self._grad_writers = {}  # id(gradient tensor) -> [collective events that wrote it] in this step
        self._stepped = set()  # id(param) stepped in the open iteration
        self._last = {}  # id(param) -> fingerprint at the end of the previous step (unstepped params)
        self._qual_cache = {}
        self._site_cache = {}

    # ------------------------------------------------------------------ observer interface

    def setup(self):
        torch = self.torch = self.obs.torch
        os.register_at_fork(after_in_child=self._forked)
        self._pin(torch)
        if self.deterministic:
            try:
                torch.use_deterministic_algorithms(True, warn_only=True)
                torch.backends.cudnn.deterministic = True
                torch.backends.cudnn.benchmark = False
            except Exception as exc:
                self.note(f"deterministic algorithms could not be turned on: {exc!r}")
        self._patch_apis(torch)
        if not self._ops_off:
            self._start_ops(torch)

    def root_seen(self, info):
        self._remember_state(info.module)

    @_quiet
    def optimizer_created(self, info):
        opt = info.optimizer
        if opt is None:
            return
        args = {k: api.describe(self.torch, v) for k, v in sorted(opt.defaults.items()) if k != "params"}
        groups = []
        for g in opt.param_groups:
            own = {k: api.describe(self.torch, v) for k, v in g.items() if k != "params" and _differs(opt.defaults.get(k, v), v)}
            groups.append({"params": len(g["params"]), **own})
        args["groups"] = groups
        params = [p for g in opt.param_groups for p in g["params"]]
        ev = self._event("optimizer", info.type, site=self._rel(info.created_at), args=args, target=f"o{info.index}")
        if ev is not None:
            ev["_params"] = [weakref.ref(p) for p in params[:4000]]

    def begin(self, k):
        if self._hooks or not self.obs._observed(k):
            return
        from torch.nn.modules import module as module_mod

        self._hooks.append(module_mod.register_module_forward_pre_hook(self._pre))
        try:
            self._hooks.append(module_mod.register_module_forward_hook(self._post, always_call=True))
        except TypeError:
            self._hooks.append(module_mod.register_module_forward_hook(self._post))

    @_quiet
    def backward(self, k, loss):
        self._trained = True
        self._event("backward", "loss.backward", out=st.summarise(self.torch, loss))

    @_quiet
    def before_step(self, info, k):
        opt = info.optimizer
        if opt is None:
            return
        self._in_step = True
        site, _ = self._sites()
        self._step_site = site
        total = sum(p.numel() for g in opt.param_groups for p in g["params"])
        keep = total <= CLONE_LIMIT
        for g in opt.param_groups:
            for p in g["params"]:
                before = st.summarise(self.torch, p)
                clone = p.detach().clone() if keep else None
                grad = None
                if p.grad is not None:
                    grad = st.summarise(self.torch, p.grad)
                    for ev in self._grad_writers.get(id(p.grad), ()):
                        ev["_grad_of"] = weakref.ref(p)
                        grad["by"] = f"{ev['fn']} at {ev.get('site')}"
                self._before[id(p)] = (before, clone, grad)

    @_quiet
    def after_step(self, info, k):
        self._in_step = False
        opt = info.optimizer
        if opt is None:
            return
        torch = self.torch
        for gi, g in enumerate(opt.param_groups):
            lr = api.describe(torch, g.get("lr"))
            for p in g["params"]:
                before, clone, grad = self._before.pop(id(p), (None, None, None))
                after = st.summarise(torch, p)
                delta = None
                if clone is not None:
                    try:
                        with torch.no_grad():
                            delta = st.scalar(torch.linalg.vector_norm((p.detach() - clone).double()))
                    except Exception:
                        delta = None
                changed = bool(before and after and (before.get("fp") != after.get("fp") or before.get("norm") != after.get("norm")))
                if delta is not None:
                    changed = delta > 0
                self._stepped.add(id(p))
                self._last[id(p)] = after.get("fp") if after else None
                ev = self._event(
                    "param", f"{info.type}.step", site=self._step_site, target=p, out=after,
                    args={"lr": lr, "group": gi}, grad=grad, delta=delta, changed=changed,
                )  # fmt: skip
                if ev is not None:
                    ev["opt"] = info.index

    @_quiet
    def end(self, k):
        torch = self.torch
        seen_params = set()
        for root in self.obs.roots:
            for _, p in root.module.named_parameters():
                if id(p) in seen_params or id(p) in self._stepped:
                    seen_params.add(id(p))
                    continue
                seen_params.add(id(p))
                out = st.summarise(torch, p)
                fp = out.get("fp") if out else None
                previous = self._last.get(id(p), fp)
                self._last[id(p)] = fp
                self._event("param", "unstepped", target=p, out=out, changed=previous != fp)
            for _, b in root.module.named_buffers():
                if b is not None and b.numel() > 0:
                    self._event("buffer", "end_of_step", target=b, out=st.summarise(torch, b))
        self._stepped = set()
        self._grad_writers = {}
        self._root_calls = 0
        self._fwd = {}
        if k >= self.obs.start + self.ops_steps - 1:
            self._end_ops()

    def finish(self, reason):
        self._remove_mode(None)
        for hook in self._hooks:
            try:
                hook.remove()
            except Exception:
                pass
        self._hooks = []
        names = self._resolve()
        return {
            "version": 1,
            "events": self.events,
            "names": names,
            "seeds": self.seeds,
            "seed": self.seed,
            "pinned": self.pin_seeds,
            "dropped": self.dropped,
            "notes": self.notes,
            "ops_steps": self.ops_steps,
        }

    # ------------------------------------------------------------------ recording

    def note(self, text):
        if text not in self.notes and len(self.notes) < 50:
            self.notes.append(text)

    def _event(self, kind, fn, site=None, at=None, target=None, args=None, out=None, **extra):
        obs = self.obs
        k = obs.k
        if obs._finished or not obs._observed(k) or os.getpid() != self._pid:
            return None
        if len(self.events) >= self.max_events:
            self.dropped[kind] = self.dropped.get(kind, 0) + 1
            return None
        self.seq += 1
        ev = {"s": self.seq, "k": k, "kind": kind, "fn": fn}
        if not self._trained:
            ev["setup"] = True
        if site is None and kind == "write":
            site, at, callers = self._sites(outer=3)
            if callers:
                extra["callers"] = callers
        elif site is None and kind not in ("param", "buffer", "backward"):
            site, at = self._sites()
        if site:
            ev["site"] = site
        if at:
            ev["at"] = at
        if target is not None:
            if isinstance(target, str):
                ev["t"] = target
            else:
                ev["_ref"] = self._ref(target)
        if args:
            ev["args"] = args
        if out is not None:
            ev["out"] = out
        for key, value in extra.items():
            if value is not None:
                ev[key] = value
        self.events.append(ev)
        return ev

    def _ref(self, obj):
        torch = self.torch
        if isinstance(obj, torch.Tensor):
            try:
                ref = weakref.ref(obj)
            except TypeError:
                ref = None
            return ("tensor", ref, _ptr(obj), list(obj.shape))
        if isinstance(obj, torch.nn.Module):
            return ("module", weakref.ref(obj), None, type(obj).__name__)
        return ("other", None, None, type(obj).__name__)

    def _count(self, kind, limit):
        key = (self.obs.k, kind)
        n = self._per_step.get(key, 0)
        if n >= limit:
            self.dropped[kind] = self.dropped.get(kind, 0) + 1
            return False
        self._per_step[key] = n + 1
        return True

    def _sites(self, outer=0):
        """(user site, innermost frame outside torch and the standard library when it differs[, outer user frames])."""
        frame = sys._getframe(2)
        at = None
        site = None
        callers = []
        base = sys.base_prefix + os.sep + "lib"
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(core.HERE):
                frame = frame.f_back
                continue
            torch_or_std = (os.sep + "torch" + os.sep) in filename or filename.startswith(("<", base))
            if site is None and at is None and not torch_or_std:
                at = self._fmt(frame)
            if not core._is_library(filename):
                if site is None:
                    site = self._fmt(frame)
                    if not outer:
                        break
                else:
                    callers.append(self._fmt(frame))
                    if len(callers) >= outer:
                        break
            frame = frame.f_back
        at = at if at != site else None
        if outer:
            return site, at, callers
        return site, at

    def _fmt(self, frame):
        code = frame.f_code
        path = self._site_cache.get(code.co_filename)
        if path is None:
            path = self._rel_path(code.co_filename)
            self._site_cache[code.co_filename] = path
        name = code.co_name
        if name.startswith("torch_dynamo_resume_in_"):  # a compiled frame resumed after a graph break
            name = name[len("torch_dynamo_resume_in_") :].rsplit("_at_", 1)[0]
        return f"{path}:{frame.f_lineno} in {name}"

    def _rel_path(self, filename):
        for prefix in self._prefixes:
            if filename.startswith(prefix):
                return filename[len(prefix) :]
        marker = os.sep + "site-packages" + os.sep
        if marker in filename:
            return filename.split(marker, 1)[1]
        return filename

    def _rel(self, site):
        if not site:
            return site
        for prefix in self._prefixes:
            if site.startswith(prefix):
                return site[len(prefix) :]
        return site

    def _forked(self):
        self._ops_off = True
        self._pid = -1

    # ------------------------------------------------------------------ seeds and determinism

    def _pin(self, torch):
        """Seed everything at import; map every seed the program gives onto a pinned one.

        The first seed a family (torch, random, numpy, cuda) is given maps to `seed`; a later one to
        `seed + (given - first given)`: re-seeding with the same value still restores the same state, and
        `seed + rank` given after a common seed still differs by rank, while two runs that differ only by
        their seed (0 against 1) train identically. The values given are recorded."""
        base = self.seed
        first = {}
        counts = {}
        tracer = self

        def pinned(family, given):
            counts[family] = counts.get(family, 0) + 1
            used = given
            if tracer.pin_seeds:
                if isinstance(given, int) and not isinstance(given, bool):
                    first.setdefault(family, given)
                    used = base + (given - first[family])
                else:
                    used = base + 10_000 + counts[family]
                used = abs(int(used)) % (2**63)
            if len(tracer.seeds) < 200:
                site, _ = tracer._sites()
                tracer.seeds.append({"fn": family, "given": api.describe(torch, given), "used": api.describe(torch, used), "site": site})
            return used

        original_torch = torch.random.manual_seed
        original_torch(base)

        def manual_seed(seed):
            if tracer._busy:
                return original_torch(seed)
            tracer._busy += 1
            try:
                return original_torch(pinned("torch.manual_seed", seed))
            finally:
                tracer._busy -= 1

        manual_seed.__wrapped__ = original_torch  # type: ignore[attr-defined]
        torch.manual_seed = manual_seed
        torch.random.manual_seed = manual_seed
        cuda = getattr(torch, "cuda", None)
        for name in ("manual_seed", "manual_seed_all"):
            original = getattr(cuda, name, None)
            if original is not None:
                setattr(cuda, name, self._seed_wrapper(original, f"torch.cuda.{name}", pinned))
        random.seed(base)
        random.seed = self._seed_wrapper(random.seed, "random.seed", pinned)
        try:
            import numpy

            numpy.random.seed(base % (2**32))
            numpy.random.seed = self._seed_wrapper(numpy.random.seed, "numpy.random.seed", pinned)
        except Exception:
            pass

    def _seed_wrapper(self, original, family, pinned):
        tracer = self

        def seed(*args, **kwargs):
            if tracer._busy:
                return original(*args, **kwargs)
            given = args[0] if args else kwargs.get("seed", kwargs.get("a"))
            used = pinned(family, given)
            if family == "numpy.random.seed" and isinstance(used, int):
                used %= 2**32
            tracer._busy += 1
            try:
                return original(used)
            finally:
                tracer._busy -= 1

        seed.__wrapped__ = original  # type: ignore[attr-defined]
        return seed

    # ------------------------------------------------------------------ API wrappers

    def _patch_apis(self, torch):
        init = torch.nn.init
        for name in api.INIT_FUNCTIONS:
            fn = getattr(init, name, None)
            if fn is not None:
                api.patch_everywhere(fn, self._wrap(fn, "init", f"torch.nn.init.{name}", target="tensor"), ["torch.nn.init"])
        for module_name in api.UTILS_MODULES:
            try:
                __import__(module_name)
            except Exception:
                continue
        done = set()
        for module_name in api.UTILS_MODULES:
            module = sys.modules.get(module_name)
            for name in api.UTILS_FUNCTIONS:
                fn = getattr(module, name, None)
                if fn is None or not callable(fn) or id(fn) in done or isinstance(fn, type(sys)):
                    continue
                if getattr(fn, "_ts_trace", False):
                    continue
                done.add(id(fn))
                public = "torch.nn.utils" if module_name in ("torch.nn.utils.clip_grad", "torch.nn.utils.spectral_norm", "torch.nn.utils.weight_norm", "torch.nn.utils.convert_parameters") else module_name
                qual = f"{public}.{name}"
                wrapper = self._wrap(fn, "utils", qual, target=api.TARGET_ARG.get(name, "auto"))
                api.patch_everywhere(fn, wrapper, api.UTILS_MODULES)
        Module = torch.nn.Module
        Module.train = self._wrap(Module.train, "mode", "Module.train", target="module")
        Module.eval = self._wrap(Module.eval, "mode", "Module.eval", target="module")
        Module.load_state_dict = self._wrap(Module.load_state_dict, "load", "Module.load_state_dict", target="module")
        Module.zero_grad = self._wrap(Module.zero_grad, "call", "Module.zero_grad", target="module")
        if hasattr(Module, "compile"):
            Module.compile = self._wrap(Module.compile, "compile", "Module.compile", target="module")
        Optim = torch.optim.Optimizer
        Optim.zero_grad = self._wrap(Optim.zero_grad, "call", "Optimizer.zero_grad", target="optimizer")
        Optim.load_state_dict = self._wrap(Optim.load_state_dict, "load", "Optimizer.load_state_dict", target="optimizer")
        if hasattr(torch, "compile"):
            torch.compile = self._wrap(torch.compile, "compile", "torch.compile", target="auto")
        register_parameter = Module.register_parameter
        register_buffer = Module.register_buffer
        tracer = self

        def reg_param(module, name, param):
            register_parameter(module, name, param)
            if param is not None:
                tracer._remember(param)

        def reg_buffer(module, name, tensor, *args, **kwargs):
            register_buffer(module, name, tensor, *args, **kwargs)
            if tensor is not None:
                tracer._remember(tensor)

        reg_param.__wrapped__ = register_parameter  # type: ignore[attr-defined]
        reg_buffer.__wrapped__ = register_buffer  # type: ignore[attr-defined]
        Module.register_parameter = reg_param
        Module.register_buffer = reg_buffer
        dist = getattr(torch, "distributed", None)
        if dist is not None and dist.is_available():
            c10d = sys.modules.get("torch.distributed.distributed_c10d")
            for name in api.COLLECTIVES:
                fn = getattr(dist, name, None)
                if fn is None:
                    continue
                wrapper = self._wrap_collective(fn, f"torch.distributed.{name}")
                api.patch_everywhere(fn, wrapper, ["torch.distributed", "torch.distributed.distributed_c10d"] if c10d else ["torch.distributed"])

    def _wrap(self, original, kind, qual, target="auto"):
        tracer = self

        def wrapper(*args, **kwargs):
            if tracer._busy or threading.get_ident() != tracer._tid or os.getpid() != tracer._pid:
                return original(*args, **kwargs)
            site, at, callers = tracer._sites(outer=3)
            if kind == "compile":
                tracer._remove_mode(f"torch.compile was called at {site}")
            if "clip_grad" in qual and args and not isinstance(args[0], (list, tuple, tracer.torch.Tensor)):
                args = (list(args[0]), *args[1:])  # a generator of parameters: count them, same call
            tracer._busy += 1
            try:
                result = original(*args, **kwargs)
            finally:
                tracer._busy -= 1
            try:
                tracer._api_call(kind, qual, original, args, kwargs, result, target, site, at, callers)
            except Exception as exc:
                tracer.note(f"could not record {qual}: {exc!r}")
            return result

        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        wrapper._ts_trace = True  # type: ignore[attr-defined]
        wrapper.__name__ = getattr(original, "__name__", qual)
        wrapper.__qualname__ = getattr(original, "__qualname__", qual)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        return wrapper

    @_quiet
    def _api_call(self, kind, qual, original, args, kwargs, result, target, site, at, callers):
        torch = self.torch
        bound, _ = api.bind(original, args, kwargs)
        target_obj = None
        if target == "module" or target == "optimizer":
            target_obj = args[0] if args else None
            bound.pop("self", None)
        elif target == "tensor" or target == "auto":
            for value in bound.values():
                if isinstance(value, (torch.Tensor, torch.nn.Module)):
                    target_obj = value
                    break
        elif target:
            target_obj = bound.get(target)
        described = {}
        for name, value in bound.items():
            if value is target_obj and target_obj is not None:
                continue
            if name in ("parameters", "params", "tensors", "state_dict") and not isinstance(value, (int, float, str)):
                described[name] = self._describe_many(value)
                continue
            described[name] = api.describe(torch, value)
        out = None
        extra = {}
        if kind == "init" and isinstance(target_obj, torch.Tensor):
            out = st.summarise(torch, target_obj)
        elif isinstance(result, torch.Tensor) and result.numel() == 1:
            out = {"value": st.scalar(result)}
        elif kind == "load" and result is not None:
            missing = getattr(result, "missing_keys", None)
            unexpected = getattr(result, "unexpected_keys", None)
            if missing is not None:
                extra["result"] = {"missing": len(missing), "unexpected": len(unexpected or [])}
        if kind == "compile":
            obj = bound.get("model") if "model" in bound else target_obj
            if isinstance(obj, torch.nn.Module):
                target_obj = obj
                described["params_in_optimizer"] = self._in_optimizer(obj)
            elif callable(obj):
                described["target"] = getattr(obj, "__qualname__", type(obj).__name__)
                target_obj = None
        if kind == "load" and isinstance(bound.get("state_dict"), dict):
            described["state_dict"] = self._describe_state(bound.get("state_dict"))
        if target == "optimizer":
            info = self.obs._opt_by_id.get(id(target_obj))
            target_obj = f"o{info.index}" if info is not None else "o?"
        self._event(kind, qual, site=site, at=at, target=target_obj, args=described, out=out, callers=callers or None, **extra)

    def _describe_many(self, value):
        torch = self.torch
        if isinstance(value, torch.Tensor):
            return api.describe(torch, value)
        try:
            items = list(value)
        except Exception:
            return api.describe(torch, value)
        return {"count": len(items)}

    def _describe_state(self, state):
        torch = self.torch
        tensors = [v for v in state.values() if isinstance(v, torch.Tensor)]
        fp = 0.0
        for t in tensors[:2000]:
            s = st.summarise(torch, t)
            if s and isinstance(s.get("fp"), float):
                fp += s["fp"]
        return {"keys": len(state), "tensors": len(tensors), "fp": st.scalar(fp)}

    def _in_optimizer(self, module):
        params = [p for p in module.parameters()]
        if not params:
            return None
        owned = set()
        for info in self.obs.optimizers:
            opt = info.optimizer
            if opt is not None:
                owned.update(id(p) for g in opt.param_groups for p in g["params"])
        if not owned:
            return None
        return round(sum(1 for p in params if id(p) in owned) / len(params), 4)

    def _wrap_collective(self, original, qual):
        tracer = self
        torch = self.torch

        def collective(*args, **kwargs):
            if tracer._busy or threading.get_ident() != tracer._tid or os.getpid() != tracer._pid:
                return original(*args, **kwargs)
            site, at, callers = tracer._sites(outer=3)
            bound, _ = api.bind(original, args, kwargs)
            tensor = next((v for v in bound.values() if isinstance(v, torch.Tensor)), None)
            if tensor is None:
                lists = [v for v in bound.values() if isinstance(v, (list, tuple)) and v and isinstance(v[0], torch.Tensor)]
                tensor = lists[-1][0] if lists else None
            tracer._busy += 1
            before = st.summarise(torch, tensor) if tensor is not None else None
            try:
                result = original(*args, **kwargs)
            finally:
                tracer._busy -= 1
            tracer._busy += 1
            try:
                asynchronous = bool(bound.get("async_op"))
                group = bound.get("group")
                described = {
                    name: api.describe(torch, value)
                    for name, value in bound.items()
                    if not isinstance(value, torch.Tensor) and name not in ("group", "tensor_list", "output_tensor_list")
                }
                size = None
                try:
                    size = torch.distributed.get_world_size(group) if group is not None else torch.distributed.get_world_size()
                except Exception:
                    pass
                described["group_size"] = size
                out = None if asynchronous or tensor is None else st.summarise(torch, tensor)
                ev = tracer._event("collective", qual, site=site, at=at, target=tensor, args=described, out=out, input=before, callers=callers or None)
                if ev is not None and tensor is not None:
                    tracer._grad_writers.setdefault(id(tensor), []).append(ev)
            except Exception as exc:
                tracer.note(f"could not record {qual}: {exc!r}")
            finally:
                tracer._busy -= 1
            return result

        collective.__wrapped__ = original  # type: ignore[attr-defined]
        collective.__name__ = getattr(original, "__name__", qual)
        return collective

    # ------------------------------------------------------------------ parameters and buffers

    def _remember(self, tensor):
        ptr = _ptr(tensor)
        if ptr:
            try:
                self._storages[ptr] = weakref.ref(tensor)
            except TypeError:
                pass

    def _remember_state(self, module):
        for p in module.parameters():
            self._remember(p)
        for b in module.buffers():
            if b is not None:
                self._remember(b)

    def _is_state(self, tensor):
        ptr = _ptr(tensor)
        if not ptr:
            return False
        ref = self._storages.get(ptr)
        return ref is not None and ref() is not None

    # ------------------------------------------------------------------ module forwards

    def _pre(self, module, args):
        if threading.get_ident() != self._tid or self._busy:
            return
        if not self._stack:
            self._root_calls += 1
        self._stack.append(module)

    def _post(self, module, args, output):
        if threading.get_ident() != self._tid or self._busy or not self._stack:
            return
        if self._stack[-1] is module:
            self._stack.pop()
        elif module in self._stack:
            while self._stack and self._stack.pop() is not module:
                pass
        try:
            self._record_forward(module, output)
        except Exception as exc:
            self.note(f"could not record a forward of {type(module).__name__}: {exc!r}")

    @_quiet
    def _record_forward(self, module, output):
        torch = self.torch
        training = bool(module.training)
        if not self._stack:
            if not any(True for _ in module.parameters()) and not any(True for _ in module.buffers()):
                return
            if not self._count("call", MAX_ROOT_CALLS_PER_STEP * 4):
                return
            site, at = self._sites()
            out = st.summarise(torch, st.first_tensor(torch, output))
            self._event(
                "call", "forward", site=site, at=at, target=module, out=out, mode=training,
                grad_enabled=torch.is_grad_enabled(), n=self._root_calls,
            )  # fmt: skip
            return
        if type(module).__name__ in WRAPPERS:
            return
        call = min(self._root_calls, MAX_ROOT_CALLS_PER_STEP)
        key = (self.obs.k, call, id(module), training)
        ev = self._fwd.get(key)
        if ev is not None:
            ev["calls"] = ev.get("calls", 1) + 1
            return
        out = st.summarise(torch, st.first_tensor(torch, output))
        ev = self._event("fwd", type(module).__name__, site="", target=module, out=out, mode=training)
        if ev is not None:
            ev["n"] = call
            self._fwd[key] = ev

    # ------------------------------------------------------------------ tensor operations

    def _start_ops(self, torch):
        base = getattr(getattr(torch, "overrides", None), "TorchFunctionMode", None)
        if base is None:
            self._ops_off = True
            return
        tracer = self

        class TraceMode(base):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                if kwargs is None:
                    kwargs = {}
                if tracer._busy or tracer._in_step or (tracer._ops_off and not tracer._writes_on()) or threading.get_ident() != tracer._tid:
                    return func(*args, **kwargs)
                tracer._busy += 1
                try:
                    result = func(*args, **kwargs)
                finally:
                    tracer._busy -= 1
                try:
                    tracer._saw_op(func, args, kwargs, result)
                except Exception as exc:
                    tracer.note(f"could not record an operation: {exc!r}")
                return result

        try:
            mode = TraceMode()
            mode.__enter__()
            self._mode = mode
        except Exception as exc:
            self._ops_off = True
            self.note(f"operation tracing is off: {exc!r}")

    def _writes_on(self):
        return self._mode is not None and not self._in_step and self.obs._observed(self.obs.k)

    def _end_ops(self):
        """Stop recording operations (in-place writes to parameters are still seen while the mode is on)."""
        self._ops_off = True

    def _remove_mode(self, why):
        """Take the TorchFunctionMode off the stack (at torch.compile and at the end), if it is on top."""
        self._ops_off = True
        mode = self._mode
        if mode is None:
            return
        try:
            from torch.overrides import _get_current_function_mode

            if _get_current_function_mode() is mode:
                mode.__exit__(None, None, None)
                self._mode = None
        except Exception:
            pass
        if why:
            self.note(f"operation tracing stopped: {why}")

    def _qual(self, func):
        key = id(func)
        name = self._qual_cache.get(key)
        if name is None:
            short = getattr(func, "__name__", None) or type(func).__name__
            qualname = getattr(func, "__qualname__", short) or short
            module = getattr(func, "__module__", None) or ""
            if qualname.startswith(("TensorBase.", "Tensor.", "_TensorBase.")):
                name = "Tensor." + short
            elif qualname.startswith("_VariableFunctions") or module.startswith("torch._VariableFunctions"):
                name = "torch." + short
            elif module in _C_MODULES:
                name = f"{_C_MODULES[module]}.{short}"
            elif module == "torch.nn.functional":
                name = f"F.{short}"
            elif module:
                name = f"{module}.{qualname}"
            else:
                name = short
            self._qual_cache[key] = name
        return name

    @_quiet
    def _saw_op(self, func, args, kwargs, result):
        torch = self.torch
        short = getattr(func, "__name__", "")
        if short in VIEW_OPS:
            return
        if (short.endswith("_") and not short.startswith("_")) or short == "__setitem__" or short.startswith("__i"):
            target = args[0] if args and isinstance(args[0], torch.Tensor) else None
            if target is not None and not self._in_step and self._is_state(target):
                if self.obs._observed(self.obs.k) and self._count("write", MAX_WRITES_PER_STEP):
                    described = {str(i): api.describe(torch, a) for i, a in enumerate(args[1:], 1) if not isinstance(a, torch.Tensor)}
                    described.update({k: api.describe(torch, v) for k, v in kwargs.items() if not isinstance(v, torch.Tensor)})
                    self._event("write", self._qual(func), target=target, args=described, out=st.summarise(torch, target))
                return
        if self._ops_off:
            return
        out = st.first_tensor(torch, result)
        if out is None or not (out.is_floating_point() or out.is_complex()):
            return
        if not self._count("op", MAX_OPS_PER_STEP):
            return
        described = {}
        for i, a in enumerate(args):
            described[str(i)] = api.describe(torch, a, values=False)
        for k, v in kwargs.items():
            described[k] = api.describe(torch, v, values=False)
        ev = self._event("op", self._qual(func), args=described, out=st.summarise(torch, out))
        if ev is not None and self._stack:
            ev["_mod"] = weakref.ref(self._stack[-1])

    # ------------------------------------------------------------------ names

    @_quiet
    def _resolve(self):
        """Give every recorded tensor and module its stable name: r<root>/<path> (wrappers' prefixes dropped)."""
        by_id, by_ptr, by_mod, display = {}, {}, {}, {}
        for root in self.obs.roots:
            m = root.module
            prefix = f"r{root.index}"
            display[prefix] = root.label
            try:
                for path, sub in m.named_modules(remove_duplicate=False):
                    key = f"{prefix}/{_norm_name(path)}".rstrip("/") if _norm_name(path) else prefix
                    by_mod.setdefault(id(sub), key)
                    display.setdefault(key, f"{root.label}.{_norm_name(path)}" if _norm_name(path) else root.label)
                for kind, items in (("p", m.named_parameters(remove_duplicate=False)), ("b", m.named_buffers(remove_duplicate=False))):
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

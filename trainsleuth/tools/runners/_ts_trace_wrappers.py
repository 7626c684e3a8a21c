"""The differential tracer's wrappers of torch APIs and seeds (a part of `Tracer`). Torch and stdlib only."""

import os
import random
import re
import sys
import threading
from typing import Any

import _ts_trace_api as api
import _ts_trace_stats as st
from _ts_trace_util import TracerState, _quiet


class ApiWrappers(TracerState):
    """Seeds pinned at import; torch.nn.init/utils, train/eval, compile, load_state_dict, zero_grad, collectives."""

    # ------------------------------------------------------------------ seeds and determinism

    def _pin(self, torch):
        """Seed everything at import; map every seed the program gives onto a pinned one.

        Each family (torch, cuda, random, numpy, generator objects) numbers the (call site, value given)
        pairs in the order they first appear, and a pair gets `seed + its number`: re-seeding with the
        same value at the same place restores the same state, different places or values get different
        streams, and two runs that differ only by the value of their seed (0 against 1), or by where the
        seeding lines sit in the file, train identically. The site is the file and function (not the
        line). The values given are recorded."""
        base = self.seed
        numbers: dict = {}
        counts: dict = {}
        tracer = self

        def pinned(family, given):
            counts[family] = counts.get(family, 0) + 1
            site, _ = tracer._sites()
            used = given
            if tracer.pin_seeds:
                where = re.sub(r":\d+ in ", " in ", site or "?")
                value = given if isinstance(given, (int, str, bytes, float)) else f"#{counts[family]}"
                table = numbers.setdefault(family, {})
                used = base + table.setdefault((where, value), len(table))
            if len(tracer.seeds) < 200:
                tracer.seeds.append(
                    {
                        "fn": family,
                        "given": api.describe(torch, given),
                        "used": api.describe(torch, used),
                        "site": site,
                    }
                )
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
        self._pin_generators(torch, pinned)
        random.seed(base)
        random.seed = self._seed_wrapper(random.seed, "random.seed", pinned)
        np: Any = None
        try:
            import numpy as np

            np.random.seed(base % (2**32))
            np.random.seed = self._seed_wrapper(np.random.seed, "numpy.random.seed", pinned)
        except Exception:
            np = None
        self._pin_rng_objects(np, pinned)

    def _pin_rng_objects(self, numpy, pinned):
        """Random-number objects the program seeds itself (an environment's `np.random.RandomState(seed)`,
        `np.random.default_rng(seed)`, `random.Random(seed)`) go through the pin as well."""
        tracer = self

        def mapped(family, seed):
            used = pinned(family, seed)
            return used % (2**32) if family.startswith("numpy") else used

        original_seed = random.Random.seed

        def py_seed(rng, a=None, version=2):
            if tracer._busy or os.getpid() != tracer._pid or rng is getattr(random, "_inst", None):
                return original_seed(rng, a, version)
            return original_seed(rng, mapped("random.Random", a), version)

        random.Random.seed = py_seed  # type: ignore[method-assign]
        if numpy is None:
            return
        try:
            legacy: Any = numpy.random.RandomState

            class RandomState(legacy):
                def __init__(self, seed=None):
                    quiet = tracer._busy or os.getpid() != tracer._pid
                    super().__init__(seed if quiet else mapped("numpy.random.RandomState", seed))

                def seed(self, seed=None):
                    quiet = tracer._busy or os.getpid() != tracer._pid
                    return super().seed(seed if quiet else mapped("numpy.random.RandomState", seed))

            RandomState.__qualname__ = RandomState.__name__ = "RandomState"
            RandomState.__module__ = "numpy.random"
            numpy.random.RandomState = RandomState
            default_rng = numpy.random.default_rng

            def pinned_default_rng(seed=None):
                if tracer._busy or os.getpid() != tracer._pid or not (seed is None or isinstance(seed, int)):
                    return default_rng(seed)
                return default_rng(mapped("numpy.random.default_rng", seed))

            numpy.random.default_rng = pinned_default_rng
        except Exception as exc:  # numpy's classes changed: their seeds stay as given
            self.note(f"numpy random generators are not pinned: {exc!r}")

    def _pin_generators(self, torch, pinned):
        """`torch.Generator()` made by the program (a data generator, a sampler's) seeds through the pin too:
        a subclass whose manual_seed maps the seed (C functions and DataLoader accept it as a Generator)."""
        base: Any = getattr(torch, "Generator", None)
        if base is None:
            return
        tracer = self
        try:

            class Generator(base):
                def manual_seed(self, seed):
                    if tracer._busy or os.getpid() != tracer._pid:
                        return super().manual_seed(seed)
                    tracer._busy += 1
                    try:
                        return super().manual_seed(pinned("torch.Generator", seed))
                    finally:
                        tracer._busy -= 1

            Generator.__qualname__ = Generator.__name__ = "Generator"
            Generator.__module__ = "torch"
            torch.Generator = Generator
        except TypeError as exc:  # a build whose Generator cannot be subclassed: its seeds stay as given
            self.note(f"seeds of torch.Generator objects are not pinned: {exc}")

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
                api.patch_everywhere(
                    fn, self._wrap(fn, "init", f"torch.nn.init.{name}", target="tensor"), ["torch.nn.init"]
                )
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
                public = (
                    "torch.nn.utils"
                    if module_name
                    in (
                        "torch.nn.utils.clip_grad",
                        "torch.nn.utils.spectral_norm",
                        "torch.nn.utils.weight_norm",
                        "torch.nn.utils.convert_parameters",
                    )
                    else module_name
                )
                qual = f"{public}.{name}"
                wrapper = self._wrap(fn, "utils", qual, target=api.TARGET_ARG.get(name, "auto"))
                api.patch_everywhere(fn, wrapper, api.UTILS_MODULES)
        Module = torch.nn.Module
        Module.train = self._wrap(Module.train, "mode", "Module.train", target="module")
        Module.eval = self._wrap(Module.eval, "mode", "Module.eval", target="module")
        Module.load_state_dict = self._wrap(
            Module.load_state_dict, "load", "Module.load_state_dict", target="module"
        )
        Module.zero_grad = self._wrap(Module.zero_grad, "call", "Module.zero_grad", target="module")
        if hasattr(Module, "compile"):
            Module.compile = self._wrap(Module.compile, "compile", "Module.compile", target="module")
        Optim = torch.optim.Optimizer
        Optim.zero_grad = self._wrap(Optim.zero_grad, "call", "Optimizer.zero_grad", target="optimizer")
        Optim.load_state_dict = self._wrap(
            Optim.load_state_dict, "load", "Optimizer.load_state_dict", target="optimizer"
        )
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
                api.patch_everywhere(
                    fn,
                    wrapper,
                    ["torch.distributed", "torch.distributed.distributed_c10d"]
                    if c10d
                    else ["torch.distributed"],
                )

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
            if name in ("parameters", "params", "tensors", "state_dict") and not isinstance(
                value, (int, float, str)
            ):
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
        self._event(
            kind,
            qual,
            site=site,
            at=at,
            target=target_obj,
            args=described,
            out=out,
            callers=callers or None,
            **extra,
        )

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
        owned: set = set()
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
                lists = [
                    v
                    for v in bound.values()
                    if isinstance(v, (list, tuple)) and v and isinstance(v[0], torch.Tensor)
                ]
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
                    if not isinstance(value, torch.Tensor)
                    and name not in ("group", "tensor_list", "output_tensor_list")
                }
                size = None
                try:
                    size = (
                        torch.distributed.get_world_size(group)
                        if group is not None
                        else torch.distributed.get_world_size()
                    )
                except Exception:
                    pass
                described["group_size"] = size
                out = None if asynchronous or tensor is None else st.summarise(torch, tensor)
                ev = tracer._event(
                    "collective",
                    qual,
                    site=site,
                    at=at,
                    target=tensor,
                    args=described,
                    out=out,
                    input=before,
                    callers=callers or None,
                )
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

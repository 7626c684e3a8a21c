"""The differential tracer's module forwards and tensor operations (a part of `Tracer`). Torch and stdlib only."""

import threading
import weakref
from typing import Any

import _ts_trace_api as api
import _ts_trace_stats as st
from _ts_trace_util import (
    _C_MODULES,
    MAX_OPS_PER_STEP,
    MAX_ROOT_CALLS_PER_STEP,
    MAX_WRITES_PER_STEP,
    VIEW_OPS,
    WRAPPERS,
    TracerState,
    _ptr,
    _quiet,
)


class ForwardsAndOps(TracerState):
    """Parameters and buffers by storage; every model call and submodule output; operations in the first steps."""

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
        base: Any = getattr(getattr(torch, "overrides", None), "TorchFunctionMode", None)
        if base is None:
            self._ops_off = True
            return
        tracer = self

        class TraceMode(base):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                if kwargs is None:
                    kwargs = {}
                if (
                    tracer._busy
                    or tracer._in_step
                    or (tracer._ops_off and not tracer._writes_on())
                    or threading.get_ident() != tracer._tid
                ):
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
            mode: Any = TraceMode()
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
        current = self._mode
        if current is None:
            return
        try:
            from torch.overrides import _get_current_function_mode

            if _get_current_function_mode() is current:
                current.__exit__(None, None, None)
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
        if short in VIEW_OPS or not self.obs._observed(self.obs.k):
            return
        if (
            (short.endswith("_") and not short.startswith("_"))
            or short == "__setitem__"
            or short.startswith("__i")
        ):
            target = args[0] if args and isinstance(args[0], torch.Tensor) else None
            if target is not None and not self._in_step and self._is_state(target):
                if self.obs._observed(self.obs.k) and self._count("write", MAX_WRITES_PER_STEP):
                    described = {
                        str(i): api.describe(torch, a)
                        for i, a in enumerate(args[1:], 1)
                        if not isinstance(a, torch.Tensor)
                    }
                    described.update(
                        {
                            k: api.describe(torch, v)
                            for k, v in kwargs.items()
                            if not isinstance(v, torch.Tensor)
                        }
                    )
                    self._event(
                        "write",
                        self._qual(func),
                        target=target,
                        args=described,
                        out=st.summarise(torch, target),
                    )
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

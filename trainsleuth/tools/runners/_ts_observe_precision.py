"""The observer's precision plugin: the user's own forward, replayed in fp32 and under bf16/fp16 autocast.

Torch and the standard library only. At the first observed step, right before the model that trains
runs its forward (the outermost module whose parameters an optimizer holds), the plugin replays that
forward on the very inputs it is about to receive, under `no_grad`: once with autocast off (fp32) and
once under `torch.autocast(device, dtype)` per reduced precision, recording every module's output and
input with the entrypoint form's recorder (`precision_runner.attach_recorders`) and comparing them
with its `compare`. Then the real forward runs as if nothing had happened: the random number
generators and every buffer (BatchNorm running statistics) are restored after each replay, and
DDP / `torch.compile` wrappers are bypassed (the replay never touches their collectives or caches).
"""

import sys
import time
from typing import Any

import _ts_dist_common as common
import precision_runner as pr

DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


def make(observer, options):
    return PrecisionPlugin(observer, options)


class PrecisionPlugin:
    def __init__(self, observer, options):
        self.obs = observer
        self.dtypes = [d for d in options.get("dtypes", ["bf16", "fp16"]) if d in DTYPES]
        self.torch: Any = None
        self.result = None
        self.error = None
        self.target = None
        self._hook = None
        self._busy = False

    def setup(self):
        self.torch = self.obs.torch

    def root_seen(self, info):
        if self.result is not None or self.target is not None or self._busy or not self._trains(info.module):
            return
        self.target = info
        if self.obs.k == self.obs.start and self.obs._observed(self.obs.k):
            found = _call_args(info.module)
            if found is not None:
                self._replay(info, *found)
                return
        self._hook = info.module.register_forward_pre_hook(self._pre_hook, with_kwargs=True)

    def _pre_hook(self, module, args, kwargs):
        if self.result is None and not self._busy and self.obs._observed(self.obs.k):
            self._replay(self.target, args, kwargs)
        if self.result is not None and self._hook is not None:
            self._hook.remove()
            self._hook = None

    def _trains(self, module):
        """The model an optimizer trains: one of its parameters is in an optimizer's param groups."""
        if not self.obs.optimizers:  # built after the first forward (lazy modules): the model under gradients
            return self.torch.is_grad_enabled()
        held: set[int] = set()
        for info in self.obs.optimizers:
            opt = info.optimizer
            if opt is not None:
                held.update(id(p) for g in opt.param_groups for p in g["params"])
        return any(id(p) in held for p in module.parameters())

    # ------------------------------------------------------------------ the replay

    def _replay(self, info, args, kwargs):
        torch = self.torch
        self._busy = True
        self.obs._depth += 1  # the replay's module calls are nested calls, never new outermost modules
        t0 = time.perf_counter()
        model = common.unwrap_module(info.module)
        params = list(model.parameters())
        device = params[0].device if params else torch.device("cpu")
        saved = _save_state(torch, model)
        try:
            user_dtype = _active_autocast(torch, device.type)
            with torch.no_grad():
                ref = self._record(model, args, kwargs, device.type, None, saved)
                results, unsupported = {}, {}
                for label in self.dtypes:
                    dtype = getattr(torch, DTYPES[label])
                    reason = pr.autocast_support(torch, device.type, dtype)
                    if reason:
                        unsupported[label] = reason
                        continue
                    low = self._record(model, args, kwargs, device.type, dtype, saved)
                    results[label] = pr.compare(torch, ref, low, model)
            self.result = {
                "ok": True,
                "device": str(device),
                "torch": torch.__version__,
                "results": results,
                "unsupported": unsupported,
                "model": info.label,
                "model_type": type(model).__name__,
                "step": self.obs.k,
                "run_autocast": user_dtype,
                "replay_s": round(time.perf_counter() - t0, 4),
            }
        except Exception as exc:
            self.result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        finally:
            _restore_state(torch, model, saved)
            self.obs._depth -= 1
            self._busy = False

    def _record(self, model, args, kwargs, device_type, dtype, saved):
        torch = self.torch
        _restore_state(torch, model, saved)  # every replay starts from the run's own state and RNG
        record, handles = pr.attach_recorders(torch, model)
        try:
            if dtype is None:
                with torch.autocast(device_type, enabled=False, cache_enabled=False):
                    model(*args, **kwargs)
            else:
                with torch.autocast(device_type, dtype=dtype, cache_enabled=False):
                    model(*args, **kwargs)
        finally:
            for h in handles:
                h.remove()
        return record

    def finish(self, reason):
        if self.result is None:
            return {"ok": False, "error": "the model that trains never ran a forward in the observed step"}
        return self.result


def _call_args(module):
    """The positional and keyword arguments of the call to `module` now under way (its `_call_impl` frame)."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        if (
            frame.f_code.co_name in ("_call_impl", "_wrapped_call_impl")
            and frame.f_locals.get("self") is module
        ):
            return tuple(frame.f_locals.get("args") or ()), dict(frame.f_locals.get("kwargs") or {})
        frame = frame.f_back
    return None


def _active_autocast(torch, device_type):
    """The dtype the run's own autocast uses around this forward, or None."""
    try:
        if torch.is_autocast_enabled(device_type):
            return str(torch.get_autocast_dtype(device_type)).replace("torch.", "")
    except Exception:
        return None
    return None


def _save_state(torch, model):
    state = {
        "cpu_rng": torch.get_rng_state(),
        "buffers": [(b, b.detach().clone()) for b in model.buffers()],
        "training": [(m, m.training) for m in model.modules()],
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda_rng"] = torch.cuda.get_rng_state_all()
    return state


def _restore_state(torch, model, state):
    torch.set_rng_state(state["cpu_rng"])
    if "cuda_rng" in state:
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    with torch.no_grad():
        for b, value in state["buffers"]:
            b.copy_(value)
    for m, training in state["training"]:
        m.training = training

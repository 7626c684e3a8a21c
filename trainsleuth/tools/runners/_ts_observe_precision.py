"""Precision plugin of the observer: the model's real first training forward, replayed in fp32 and bf16/fp16.

Torch and the standard library only. When an outermost module is first called with gradients on
in an observed iteration, this plugin takes the very inputs of that call (from the frame of
`Module._call_impl`, or, when that is not possible, with a forward pre-hook at the module's next
call), and before the real forward runs it replays the module's forward twice more under no_grad:
with autocast disabled (fp32) and under `torch.autocast(device, dtype)` for each reduced precision,
recording every submodule's output and input (`precision_runner.record_outputs`) and comparing them
as the entrypoint form does (`precision_runner.compare`). The training run is left as it was: the
inputs are cloned, the random generators' states, every buffer (BatchNorm statistics) and the
modules' plain attributes are restored after each replay.
"""

import sys
from typing import Any

import _ts_dist_common as common
import _ts_observe

MAX_ROOTS = 4


def make(observer, options):
    return PrecisionPlugin(observer, options)


class PrecisionPlugin:
    def __init__(self, observer, options):
        self.obs = observer
        self.dtypes = [d for d in options.get("dtypes", ["bf16", "fp16"]) if d in ("bf16", "fp16")]
        self.torch: Any = None
        self.pr: Any = None
        self.replays = []  # one per replayed module
        self._pending = {}  # id(module) -> hook handle waiting for its next training call

    def setup(self):
        self.torch = self.obs.torch
        import precision_runner

        self.pr = precision_runner

    def root_seen(self, info):
        if len(self.replays) + len(self._pending) >= MAX_ROOTS or not self._trains(info.module):
            return
        if self.torch.is_grad_enabled() and self.obs._observed(self.obs.k):
            call = _current_call(info.module)
            if call is not None:
                self._replay(info.label, info.module, *call)
                return
        module = info.module

        def pre_hook(mod, args, kwargs):
            if not self.torch.is_grad_enabled() or not self.obs._observed(self.obs.k):
                return None
            handle = self._pending.pop(id(mod), None)
            if handle is not None:
                handle.remove()
                self._replay(info.label, mod, args, kwargs)
            return None

        self._pending[id(module)] = module.register_forward_pre_hook(pre_hook, with_kwargs=True)

    def finish(self, reason):
        for handle in self._pending.values():
            handle.remove()
        self._pending = {}
        return {"replays": self.replays}

    # ------------------------------------------------------------------ the replay

    def _trains(self, module):
        return any(p.requires_grad for p in module.parameters())

    def _replay(self, label, module, args, kwargs):
        torch, pr = self.torch, self.pr
        model = common.unwrap_module(module)
        params = list(model.parameters())
        device = params[0].device if params else torch.device("cpu")
        entry = {
            "label": label,
            "type": type(model).__name__,
            "wrapper": type(module).__name__ if model is not module else None,
            "step": self.obs.k,
            "device": str(device),
            "called_at": _ts_observe.user_site(),
            "results": {},
            "unsupported": {},
        }
        self.replays.append(entry)
        saved = _State(torch, model)
        try:
            ref = self._forward(model, args, kwargs, device.type, None)
            saved.restore()
            names = {"bf16": torch.bfloat16, "fp16": torch.float16}
            for label_dtype in self.dtypes:
                reason = pr.autocast_support(torch, device.type, names[label_dtype])
                if reason:
                    entry["unsupported"][label_dtype] = reason
                    continue
                low = self._forward(model, args, kwargs, device.type, names[label_dtype])
                saved.restore()
                entry["results"][label_dtype] = pr.compare(torch, ref, low, model)
        except Exception as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        finally:
            saved.restore()

    def _forward(self, model, args, kwargs, device_type, dtype):
        torch, pr = self.torch, self.pr
        rec = pr.record_outputs(torch, model)
        args = common.tree_map(lambda t: t.detach().clone(), args)
        kwargs = common.tree_map(lambda t: t.detach().clone(), dict(kwargs or {}))
        self.obs._depth += 1  # the replay's calls are not the program's: no new outermost module, no count
        try:
            with (
                torch.no_grad(),
                torch.autocast(device_type, dtype=dtype or torch.float32, enabled=dtype is not None),
            ):
                model(*args, **kwargs)
        finally:
            self.obs._depth -= 1
            for h in rec["handles"]:
                h.remove()
        return {**rec, "loss": None, "grads": {}}


class _State:
    """What a forward may change beside its output: random generators, buffers, plain attributes."""

    def __init__(self, torch, model):
        self.torch = torch
        self.cpu_rng = torch.get_rng_state()
        self.cuda_rng = (
            torch.cuda.get_rng_state_all()
            if torch.cuda.is_available() and torch.cuda.is_initialized()
            else None
        )
        self.buffers = [(b, b.detach().clone()) for b in model.buffers()]
        self.attrs = [(m, dict(vars(m))) for m in model.modules()]

    def restore(self):
        torch = self.torch
        torch.set_rng_state(self.cpu_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(self.cuda_rng)
        with torch.no_grad():
            for b, value in self.buffers:
                b.copy_(value)
        for m, before in self.attrs:
            now = vars(m)
            for key in [k for k in now if k not in before]:
                del now[key]
            for key, value in before.items():
                if now.get(key) is not value:
                    now[key] = value


def _current_call(module):
    """(args, kwargs) of the call of `module` under way: read from the frame of `Module._call_impl`."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        if (
            frame.f_code.co_name in ("_call_impl", "_wrapped_call_impl")
            and frame.f_locals.get("self") is module
        ):
            args = frame.f_locals.get("args")
            kwargs = frame.f_locals.get("kwargs")
            if isinstance(args, tuple) and isinstance(kwargs, dict):
                return args, kwargs
            return None
        frame = frame.f_back
    return None

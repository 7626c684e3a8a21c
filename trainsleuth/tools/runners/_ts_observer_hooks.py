"""How the observer finds what trains: hooks on torch for every optimizer built, every scalar `backward()`
(unscaled when a GradScaler scaled it) and the outermost modules called, and the names the user's code
calls its models by. A mixin of `Observer` (`_ts_observe.py`). The standard library only; torch is
handed in once the user's code imports it.
"""

import sys
import weakref
from typing import Any

try:  # imported as part of the trainsleuth package
    from ._ts_observer_util import _is_library, user_site
except ImportError:  # imported from the runner's own folder (user's interpreter)
    from _ts_observer_util import _is_library, user_site  # type: ignore[no-redef]


class OptimizerInfo:
    def __init__(self, index, optimizer, created_at):
        self.index = index
        self.ref = weakref.ref(optimizer)
        self.type = type(optimizer).__name__
        self.created_at = created_at
        self.steps = 0
        self.closure_steps = 0

    @property
    def optimizer(self):
        return self.ref()

    def describe(self):
        opt = self.ref()
        params = [p for g in opt.param_groups for p in g["params"]] if opt is not None else []
        return {
            "index": self.index,
            "type": self.type,
            "created_at": self.created_at,
            "steps": self.steps,
            "closure_steps": self.closure_steps,
            "param_tensors": len(params),
            "param_numel": int(sum(p.numel() for p in params)),
            "groups": len(opt.param_groups) if opt is not None else 0,
        }


class RootInfo:
    def __init__(self, index, module, label, first_called_at, grad_enabled):
        self.index = index
        self.module = module
        self.label = label
        self.first_called_at = first_called_at
        self.calls = 0
        self.grad_calls = 0
        self.first_grad = grad_enabled
        self.args = None  # the first call's positional arguments, during root_seen only

    def describe(self):
        m = self.module
        return {
            "index": self.index,
            "label": self.label,
            "type": type(m).__name__,
            "first_called_at": self.first_called_at,
            "calls": self.calls,
            "grad_calls": self.grad_calls,
            "params": sum(1 for _ in m.parameters()),
            "buffers": sum(1 for _ in m.buffers()),
        }


class TorchHooksMixin:
    """Optimizer, backward and module hooks; expects the `Observer` attributes it touches."""

    # set by Observer.__init__ and its other parts
    backward_tensor: Any
    _call: Any
    _depth: Any
    _finished: Any
    _global_hooks: Any
    k: Any
    _module_hooks: Any
    _module_mod: Any
    notes: Any
    _observed: Any
    _opt_by_id: Any
    optimizers: Any
    _pending_losses: Any
    _root_by_id: Any
    roots: Any
    _scalers: Any
    _step_post: Any
    _step_pre: Any
    torch: Any

    def _hook_optimizers(self, torch):
        base = torch.optim.Optimizer
        original_init = base.__init__
        observer = self

        def init(opt, *args, **kwargs):
            original_init(opt, *args, **kwargs)
            try:
                observer._register_optimizer(opt, user_site())
            except Exception as exc:  # never break the user's optimizer
                observer.notes.append(f"optimizer registration failed: {exc!r}")

        init.__wrapped__ = original_init  # type: ignore[attr-defined]
        base.__init__ = init
        from torch.optim import optimizer as optim_mod

        self._global_hooks.append(optim_mod.register_optimizer_step_pre_hook(self._step_pre))
        self._global_hooks.append(optim_mod.register_optimizer_step_post_hook(self._step_post))

    def _register_optimizer(self, opt, site):
        if id(opt) in self._opt_by_id and self._opt_by_id[id(opt)].optimizer is opt:
            return self._opt_by_id[id(opt)]
        info = OptimizerInfo(len(self.optimizers), opt, site)
        self.optimizers.append(info)
        self._opt_by_id[id(opt)] = info
        self._call("optimizer_created", info)
        return info

    def _hook_backward(self, torch):
        original = torch.autograd.backward
        observer = self

        def backward(tensors, *args, **kwargs):
            if not observer._finished and observer._observed(observer.k):
                observer._saw_backward(tensors)
            return original(tensors, *args, **kwargs)

        backward.__wrapped__ = original  # type: ignore[attr-defined]
        torch.autograd.backward = backward
        scaler_cls = getattr(getattr(torch, "amp", None), "GradScaler", None)
        if scaler_cls is not None and hasattr(scaler_cls, "scale"):
            original_scale = scaler_cls.scale

            def scale(scaler, outputs):
                scaled = original_scale(scaler, outputs)
                if isinstance(outputs, torch.Tensor) and isinstance(scaled, torch.Tensor):
                    observer._scalers[id(scaled)] = outputs
                return scaled

            scale.__wrapped__ = original_scale  # type: ignore[attr-defined]
            scaler_cls.scale = scale

    def _saw_backward(self, tensors):
        torch = self.torch
        t = tensors
        if isinstance(t, (list, tuple)):
            t = t[0] if len(t) == 1 else None
        if not isinstance(t, torch.Tensor) or t.numel() != 1:
            return
        unscaled = self._scalers.get(id(t))
        loss = (unscaled if unscaled is not None else t).detach()
        self._pending_losses.append(loss)
        self.backward_tensor = t
        try:
            self._call("backward", self.k, loss)
        finally:
            self.backward_tensor = None

    def _hook_modules(self, torch):
        """Global forward hooks find the outermost modules: on in iteration 1 and the observed window only."""
        from torch.nn.modules import module as module_mod

        self._module_mod = module_mod
        self._attach_module_hooks()

    def _attach_module_hooks(self):
        if self._module_hooks:
            return
        module_mod = self._module_mod
        self._depth = 0
        self._module_hooks.append(module_mod.register_module_forward_pre_hook(self._forward_pre))
        try:
            self._module_hooks.append(
                module_mod.register_module_forward_hook(self._forward_post, always_call=True)
            )
        except TypeError:  # torch < 2.1: no always_call; depth is reset at each step
            self._module_hooks.append(module_mod.register_module_forward_hook(self._forward_post))

    def _detach_module_hooks(self):
        for hook in self._module_hooks:
            try:
                hook.remove()
            except Exception:
                pass
        self._module_hooks = []

    # ------------------------------------------------------------------ events

    def _forward_pre(self, module, args):
        if self._depth == 0 and not self._finished:
            self._saw_root(module, args)
        self._depth += 1

    def _forward_post(self, module, args, output):
        if self._depth > 0:
            self._depth -= 1

    def _saw_root(self, module, args=()):
        info = self._root_by_id.get(id(module))
        grad = self.torch.is_grad_enabled()
        if info is None or info.module is not module:
            if not any(True for _ in module.parameters()) and not any(True for _ in module.buffers()):
                return  # a stateless module called on its own (a loss, an activation): not a model
            info = RootInfo(len(self.roots), module, self._label(module), user_site(), grad)
            self.roots.append(info)
            self._root_by_id[id(module)] = info
            info.args = args
            try:
                self._call("root_seen", info)
            finally:
                info.args = None
        info.calls += 1
        if grad:
            info.grad_calls += 1

    def _label(self, module):
        """A name for a model: the variable or attribute the user's code calls it by, else its class."""
        target = module
        frame: Any = sys._getframe(3)
        for _ in range(12):
            if frame is None:
                break
            if not _is_library(frame.f_code.co_filename):
                for name, value in frame.f_locals.items():
                    if value is target and name != "self":
                        return self._unique(name)
                owner = frame.f_locals.get("self")
                if owner is not None and owner is not target:
                    for name, value in getattr(owner, "__dict__", {}).items():
                        if value is target:
                            return self._unique(name)
                    modules = getattr(owner, "_modules", None)
                    if isinstance(modules, dict):
                        for name, value in modules.items():
                            if value is target:
                                return self._unique(name)
                path = self._submodule_path(frame.f_locals, target)
                if path is None and owner is not None and owner is not target:
                    path = self._submodule_path(getattr(owner, "__dict__", {}), target)
                    if path is None and isinstance(getattr(owner, "_modules", None), dict):
                        path = self._submodule_path(owner._modules, target)
                if path is not None:  # `model.features(x)`: called as a part of a model the code holds
                    return self._unique(path)
                break
            frame = frame.f_back
        return self._unique(type(module).__name__)

    def _submodule_path(self, namespace, target):
        """`model.features` when `target` is a submodule of a module named `model` in `namespace`."""
        module_cls = self.torch.nn.Module
        for name, value in list(namespace.items()):
            if name == "self" or not isinstance(value, module_cls) or value is target:
                continue
            for sub_name, sub in value.named_modules():
                if sub is target:
                    return f"{name}.{sub_name}"
        return None

    def _unique(self, name):
        taken = {r.label for r in self.roots}
        if name not in taken:
            return name
        i = 2
        while f"{name}#{i}" in taken:
            i += 1
        return f"{name}#{i}"

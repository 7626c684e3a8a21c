"""The observer: trainsleuth inside the user's own training command. Torch and the standard library only.

`observer_site/sitecustomize.py` calls `install(CONFIG)` at start-up in every Python process of the
command. Nothing happens until the user's code imports torch; then the observer finds what trains
by watching, not by asking for an adapter:

- every optimizer, when it is built (`Optimizer.__init__`, with the line that built it) and each step
  (the global optimizer step hooks);
- the models: the outermost modules called (a module called while no other module's forward runs),
  whether under gradients or not (an EMA copy, a frozen teacher, a DDP wrapper's inner module);
- the loss: every `backward()` on a scalar (unscaled when a GradScaler scaled it).

A training step ("iteration") is one round of optimizer steps: it ends when every optimizer that
steps has stepped (the first time: every optimizer built), or when one of them steps again. The
observer watches iterations `start .. start+steps-1`, hands each event to its plugins
(`_ts_observe_<name>.py`: probe, distributed, precision, trace, ...), writes one JSON report per
process into the run's output folder and, when asked, stops the run cleanly at the end of the last
observed iteration (SystemExit(0) from the optimizer hook; a watchdog ends the process if the
program swallows it).

Plugin interface (every method optional; `make(observer, options)` builds one):
    setup()                      torch is imported; patch or hook what you need
    optimizer_created(info)      an optimizer was built (OptimizerInfo)
    root_seen(info)              an outermost module was called for the first time (RootInfo)
    begin(k)                     observed iteration k opens (before its forward)
    backward(k, loss)            a scalar backward in observed iteration k (detached loss tensor)
    before_step(info, k)         an optimizer is about to step in observed iteration k (grads are final)
    after_step(info, k)          it has stepped
    end(k)                       observed iteration k is complete
    finish(reason) -> dict       the run ends; return the plugin's section of the report
A plugin's exception is recorded in the report and disables that plugin; the user's run goes on.
"""

import atexit
import json
import os
import socket
import sys
import threading
import time
import traceback
import weakref
from typing import Any

_open = open  # the observer's own files: taken before the guard wraps `open`

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT_PREFIX = "proc-"
PROGRESS_PREFIX = "progress-"
STOP_GRACE_S = 20.0
MAX_RECORDED_ITERATIONS = 2000

_observer = None


class ObserverStop(SystemExit):
    """Raised from an optimizer hook to end the user's run after the observed steps (exit code 0)."""


def install(config_path):
    """Install the observer in this process (idempotent); torch is hooked when the user imports it."""
    global _observer
    if _observer is not None:
        return _observer
    with open(config_path, encoding="utf-8") as fh:
        config = json.load(fh)
    _observer = Observer(config)
    _observer.arm()
    return _observer


def current():
    return _observer


def user_site(skip=()):
    """`file:line in function` of the innermost frame that is the user's code (not torch, not us)."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_library(filename) and not any(s in filename for s in skip):
            return f"{filename}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    return None


_LIB_MARKERS = (
    os.sep + "torch" + os.sep,
    os.sep + "site-packages" + os.sep,
    os.sep + "dist-packages" + os.sep,
    "<frozen ",
    "<string>",
)


def _is_library(filename):
    if filename.startswith(HERE):
        return True
    return any(m in filename for m in _LIB_MARKERS) or filename.startswith(sys.base_prefix + os.sep + "lib")


def identity():
    env = os.environ
    node = env.get("GROUP_RANK") or env.get("NODE_RANK") or env.get("SLURM_NODEID") or "0"
    return {
        "pid": os.getpid(),
        "rank": _int(env.get("RANK"), 0),
        "local_rank": _int(env.get("LOCAL_RANK"), 0),
        "world_size": _int(env.get("WORLD_SIZE"), 1),
        "node": _int(node, 0),
        "hostname": socket.gethostname(),
        "argv": list(sys.argv)[:32],
        "python": sys.executable,
    }


def _int(value, default):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


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


class Observer:
    def __init__(self, config):
        self.config = config
        self.out_dir = config["out_dir"]
        self.start = max(1, int(config.get("start", 1)))
        self.steps = max(1, int(config.get("steps", 8)))
        self.last = self.start + self.steps - 1
        self.stop_after = bool(config.get("stop", True))
        self.identity = identity()
        self.pid = os.getpid()
        self.torch: Any = None
        self.plugins = []
        self.plugin_errors = {}
        self.notes = []
        self.optimizers = []
        self._opt_by_id = {}
        self.roots = []
        self._root_by_id = {}
        self.k = 1  # the open iteration
        self._stepped = set()
        self._ever_stepped = set()
        self.iterations = []
        self._pending_losses = []
        self._depth = 0
        self._global_hooks = []
        self._module_hooks = []
        self._module_mod: Any = None
        self._finished = False
        self.reason = None
        self.exception = None
        self.t0 = time.time()
        self._iter_t0 = None
        self._lock = threading.RLock()
        self._scalers: Any = weakref.WeakValueDictionary()

    # ------------------------------------------------------------------ set-up

    def arm(self):
        os.makedirs(self.out_dir, exist_ok=True)
        guard = self.config.get("guard")
        if guard:
            import _ts_observe_guard

            _ts_observe_guard.install(guard["mirror"], guard["workspace"], guard.get("exempt", ()))
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forked)
        atexit.register(self._at_exit)
        previous = sys.excepthook

        def excepthook(tp, value, tb):
            if not isinstance(value, SystemExit):
                self.exception = {
                    "type": tp.__name__,
                    "message": str(value)[:2000],
                    "traceback": "".join(traceback.format_exception(tp, value, tb))[-8000:],
                }
            previous(tp, value, tb)

        sys.excepthook = excepthook
        if "torch" in sys.modules:
            self._on_torch(sys.modules["torch"])
        else:
            sys.meta_path.insert(0, _TorchImportHook(self._on_torch))

    def _forked(self):
        """A forked child (a DataLoader worker) is not the observed process: go quiet."""
        self._finished = True
        self.plugins = []

    def _on_torch(self, torch):
        if os.getpid() != self.pid or self.torch is not None:
            return
        self.torch = torch
        self.identity["torch"] = getattr(torch, "__version__", "?")
        if self.config.get("guard"):
            import _ts_observe_guard

            _ts_observe_guard.protect_torch(torch)
        try:
            self._hook_optimizers(torch)
            self._hook_backward(torch)
            self._hook_modules(torch)
        except Exception as exc:
            self.notes.append(f"the observer could not hook torch {self.identity['torch']}: {exc!r}")
            return
        self._load_plugins()
        self._call("setup")
        if self._observed(self.k):
            self._call("begin", self.k)

    def _load_plugins(self):
        for name in self.config.get("plugins", []):
            try:
                module = __import__(f"_ts_observe_{name}")
                plugin = module.make(self, dict(self.config.get("options", {}).get(name, {})))
            except Exception:
                self.plugin_errors[name] = traceback.format_exc()[-4000:]
                continue
            plugin.name = name
            self.plugins.append(plugin)

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
        self._call("backward", self.k, loss)

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
            self._saw_root(module)
        self._depth += 1

    def _forward_post(self, module, args, output):
        if self._depth > 0:
            self._depth -= 1

    def _saw_root(self, module):
        info = self._root_by_id.get(id(module))
        grad = self.torch.is_grad_enabled()
        if info is None or info.module is not module:
            if not any(True for _ in module.parameters()) and not any(True for _ in module.buffers()):
                return  # a stateless module called on its own (a loss, an activation): not a model
            info = RootInfo(len(self.roots), module, self._label(module), user_site(), grad)
            self.roots.append(info)
            self._root_by_id[id(module)] = info
            self._call("root_seen", info)
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

    def _step_pre(self, optimizer, args, kwargs):
        if self._finished or os.getpid() != self.pid:
            return None
        with self._lock:
            self._depth = 0
            info = self._opt_by_id.get(id(optimizer))
            if info is None or info.optimizer is not optimizer:
                info = self._register_optimizer(optimizer, None)
            if info.index in self._stepped:
                self._close(self.k)  # may raise ObserverStop: the step is not taken
            self._stepped.add(info.index)
            self._ever_stepped.add(info.index)
            info.steps += 1
            # torch passes the hook the step's whole argument tuple: (optimizer, closure?)
            closure_in_args = len(args) > 1 and callable(args[1])
            closure = args[1] if closure_in_args else kwargs.get("closure")
            if closure is not None:
                info.closure_steps += 1
            if not self._observed(self.k):
                return None
            if self._iter_t0 is None:
                self._iter_t0 = time.time()
            if closure is None:
                self._before_step(info)
                return None
            # step(closure) (LBFGS, Lightning): the forward and backward run inside the closure, after this
            # hook; `before_step` waits for the closure's first evaluation, when the gradients are this step's
            # and the weights have not moved yet.
            wrapped = self._closure_then_before_step(closure, info)
            if closure_in_args:
                return (args[0], wrapped, *args[2:]), kwargs
            return args, dict(kwargs, closure=wrapped)

    def _before_step(self, info):
        self._losses_for(info)
        self._call("before_step", info, self.k)

    def _closure_then_before_step(self, closure, info):
        observer = self
        state = {"first": True}

        def closure_then_before_step(*a, **kw):
            result = closure(*a, **kw)
            if state["first"]:
                state["first"] = False
                with observer._lock:
                    observer._before_step(info)
            return result

        return closure_then_before_step

    def _step_post(self, optimizer, args, kwargs):
        if self._finished or os.getpid() != self.pid:
            return
        with self._lock:
            info = self._opt_by_id.get(id(optimizer))
            if info is None:
                return
            if self._observed(self.k):
                self._call("after_step", info, self.k)
                self._record_lr(info)
            if self._stepped >= self._expected():
                self._close(self.k)

    def _expected(self):
        if self.k == 1 and len(self._ever_stepped) <= len(self._stepped):
            alive = {
                i.index
                for i in self.optimizers
                if i.optimizer is not None
                and any(p.requires_grad for g in i.optimizer.param_groups for p in g["params"])
            }
            return alive or set(self._stepped)
        return set(self._ever_stepped)

    def _observed(self, k):
        return self.start <= k <= self.last

    def _losses_for(self, info):
        rec = self._iteration_record(self.k)
        for loss in self._pending_losses:
            rec["backward"].append({"optimizer": info.index, "loss": loss})
        self._pending_losses = []

    def _iteration_record(self, k):
        if not self.iterations or self.iterations[-1]["step"] != k:
            self.iterations.append({"step": k, "backward": [], "optimizers": [], "lr": {}})
            if len(self.iterations) > MAX_RECORDED_ITERATIONS:
                del self.iterations[0]
        return self.iterations[-1]

    def _record_lr(self, info):
        opt = info.optimizer
        rec = self._iteration_record(self.k)
        rec["optimizers"].append(info.index)
        if opt is not None:
            rec["lr"][str(info.index)] = [_lr(g) for g in opt.param_groups]

    def _close(self, k):
        """Iteration k is complete: tell the plugins, record it, open k+1, stop after the last one."""
        observed = self._observed(k)
        if observed:
            rec = self._iteration_record(k)
            for loss in self._pending_losses:  # backward calls after the last step (rare)
                rec["backward"].append({"optimizer": None, "loss": loss})
            self._pending_losses = []
            rec["time_s"] = round(time.time() - self._iter_t0, 6) if self._iter_t0 else None
            rec["backward"] = [
                {"optimizer": b["optimizer"], "loss": _float(b["loss"])} for b in rec["backward"]
            ]
            self._call("end", k)
            self._progress(k)
        self._stepped = set()
        self._iter_t0 = None
        self.k = k + 1
        if self._observed(self.k):
            self._attach_module_hooks()
        else:
            self._detach_module_hooks()  # between iteration 1 and the window, and after it: no cost per module
        if observed and k >= self.last and self.stop_after:
            self.finish("steps_done")
            self._stop()
        if self._observed(self.k):
            self._call("begin", self.k)

    def _progress(self, k):
        path = os.path.join(self.out_dir, f"{PROGRESS_PREFIX}{self._tag()}.json")
        _write_json(path, {"step": k, "time": time.time(), "pid": self.pid, "rank": self.identity["rank"]})

    def _stop(self):
        def watchdog():
            time.sleep(STOP_GRACE_S)
            os._exit(0)

        threading.Thread(target=watchdog, daemon=True, name="trainsleuth-stop").start()
        raise ObserverStop(0)

    # ------------------------------------------------------------------ plugins and report

    def _call(self, method, *args):
        for plugin in list(self.plugins):
            fn = getattr(plugin, method, None)
            if fn is None:
                continue
            try:
                fn(*args)
            except ObserverStop:
                raise
            except Exception:
                self.plugin_errors[plugin.name] = traceback.format_exc()[-4000:]
                self.plugins.remove(plugin)

    def note(self, text):
        if text not in self.notes and len(self.notes) < 200:
            self.notes.append(text)

    def observed_steps(self):
        return [r["step"] for r in self.iterations if self._observed(r["step"])]

    def finish(self, reason):
        """Write this process's report once (the observed steps are done, the run ended, or it failed)."""
        with self._lock:
            if self._finished:
                return
            self._finished = True
            self.reason = reason
            sections = {}
            for plugin in list(self.plugins):
                fn = getattr(plugin, "finish", None)
                if fn is None:
                    continue
                try:
                    sections[plugin.name] = fn(reason)
                except Exception:
                    self.plugin_errors[plugin.name] = traceback.format_exc()[-4000:]
            self._detach_module_hooks()
            for hook in self._global_hooks:
                try:
                    hook.remove()
                except Exception:
                    pass
            report = {
                "identity": self.identity,
                "reason": reason,
                "torch_imported": self.torch is not None,
                "window": {"start": self.start, "steps": self.steps},
                "last_iteration": self.k - 1,
                "optimizers": [o.describe() for o in self.optimizers],
                "roots": [r.describe() for r in self.roots],
                "iterations": [r for r in self.iterations if "time_s" in r][-MAX_RECORDED_ITERATIONS:],
                "exception": self.exception,
                "notes": self.notes,
                "plugins": sections,
                "plugin_errors": self.plugin_errors,
                "elapsed_s": round(time.time() - self.t0, 3),
            }
            _write_json(os.path.join(self.out_dir, f"{REPORT_PREFIX}{self._tag()}.json"), report)

    def _tag(self):
        ident = self.identity
        return f"n{ident['node']}-r{ident['rank']}-p{self.pid}"

    def _at_exit(self):
        if os.getpid() != self.pid or self.torch is None:
            return
        if not self._finished:
            self.finish("exception" if self.exception else "script_ended")


class _TorchImportHook:
    """A meta-path finder that runs `callback(torch)` right after `import torch` finishes."""

    def __init__(self, callback):
        self.callback = callback

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch":
            return None
        import importlib.util

        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original = loader.exec_module
        callback = self.callback

        def exec_module(module):
            original(module)
            try:
                callback(module)
            except Exception as exc:
                sys.stderr.write(f"trainsleuth observer: could not hook torch: {exc!r}\n")

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec

    def find_module(self, fullname, path=None):  # Python < 3.4 protocol; never used
        return None


def _lr(group):
    lr = group.get("lr")
    try:
        return float(lr)
    except (TypeError, ValueError):
        return None


def _float(t):
    try:
        v = float(t)
    except Exception:
        return None
    return v if v == v and abs(v) != float("inf") else str(v)


def _write_json(path, data):
    tmp = f"{path}.tmp{os.getpid()}"
    with _open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, default=_jsonable)
    os.replace(tmp, path)


def _jsonable(value):
    try:
        return float(value)
    except Exception:
        return repr(value)[:200]

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
    root_seen(info)              an outermost module was called for the first time (RootInfo; while
                                 this runs, `info.args` holds that call's positional arguments)
    begin(k)                     observed iteration k opens (before its forward)
    backward(k, loss)            a scalar backward in observed iteration k (detached loss tensor; while
                                 this runs, `observer.backward_tensor` is the tensor itself, graph and all)
    before_step(info, k)         an optimizer is about to step in observed iteration k (grads are final)
    after_step(info, k)          it has stepped
    end(k)                       observed iteration k is complete
    finish(reason) -> dict       the run ends; return the plugin's section of the report
A plugin's exception is recorded in the report and disables that plugin; the user's run goes on.
"""

import atexit
import json
import os
import sys
import threading
import time
import traceback
import weakref
from typing import Any

try:  # imported as part of the trainsleuth package
    from ._ts_observer_hooks import OptimizerInfo, RootInfo, TorchHooksMixin
    from ._ts_observer_steps import (
        MAX_RECORDED_ITERATIONS,
        PROGRESS_PREFIX,
        STOP_GRACE_S,
        IterationsMixin,
        ObserverStop,
    )
    from ._ts_observer_util import HERE, _is_library, _jsonable, _open, _write_json, identity, user_site
except ImportError:  # imported from the runner's own folder (user's interpreter)
    from _ts_observer_hooks import OptimizerInfo, RootInfo, TorchHooksMixin  # type: ignore[no-redef]
    from _ts_observer_steps import (  # type: ignore[no-redef]
        MAX_RECORDED_ITERATIONS,
        PROGRESS_PREFIX,
        STOP_GRACE_S,
        IterationsMixin,
        ObserverStop,
    )
    from _ts_observer_util import (  # type: ignore[no-redef]
        HERE,
        _is_library,
        _jsonable,
        _open,
        _write_json,
        identity,
        user_site,
    )

REPORT_PREFIX = "proc-"

_observer = None


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


class Observer(TorchHooksMixin, IterationsMixin):
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
        self._last_round = set()  # the optimizers that stepped in the last completed iteration
        self.iterations = []
        self._pending_losses = []
        self.backward_tensor = None  # during a plugin's backward(): the loss tensor with its graph
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


__all__ = [
    "HERE",
    "MAX_RECORDED_ITERATIONS",
    "PROGRESS_PREFIX",
    "REPORT_PREFIX",
    "STOP_GRACE_S",
    "Observer",
    "ObserverStop",
    "OptimizerInfo",
    "RootInfo",
    "_is_library",
    "_jsonable",
    "_open",
    "_write_json",
    "current",
    "identity",
    "install",
    "user_site",
]

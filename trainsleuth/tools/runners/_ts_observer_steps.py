"""The observer's iterations: a training step is one round of optimizer steps. The optimizer hooks open
and close iterations, hand each observed one to the plugins, record its losses and learning rates and
stop the run after the last one. A mixin of `Observer` (`_ts_observe.py`). The standard library only.
"""

import os
import threading
import time
from typing import Any

try:  # imported as part of the trainsleuth package
    from ._ts_observer_util import _write_json
except ImportError:  # imported from the runner's own folder (user's interpreter)
    from _ts_observer_util import _write_json  # type: ignore[no-redef]

PROGRESS_PREFIX = "progress-"
STOP_GRACE_S = 20.0
MAX_RECORDED_ITERATIONS = 2000


class ObserverStop(SystemExit):
    """Raised from an optimizer hook to end the user's run after the observed steps (exit code 0)."""


class IterationsMixin:
    """Optimizer-step hooks and the iteration window; expects the `Observer` attributes it touches."""

    # set by Observer.__init__ and its other parts
    _attach_module_hooks: Any
    _call: Any
    _depth: Any
    _detach_module_hooks: Any
    _ever_stepped: Any
    finish: Any
    _finished: Any
    identity: Any
    _iter_t0: Any
    iterations: Any
    k: Any
    last: Any
    _last_round: Any
    _lock: Any
    _opt_by_id: Any
    optimizers: Any
    out_dir: Any
    _pending_losses: Any
    pid: Any
    _register_optimizer: Any
    start: Any
    _stepped: Any
    stop_after: Any
    _tag: Any

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
        # the last round, not every optimizer that ever stepped: after a phase ends (a teacher trained first,
        # a warm-up optimizer) its optimizer no longer steps, and waiting for it would make every later
        # iteration end only at the next step's pre-hook, after that step's backward
        return set(self._last_round) or set(self._ever_stepped)

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
        self._last_round = set(self._stepped)
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

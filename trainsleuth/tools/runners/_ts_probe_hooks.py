"""The probe's hooks on a model: each module's forward (finite inputs and outputs, activations, the root's
inputs) and each gradient in backward (parameters, module outputs). A mixin of `Recorder`. Torch only.

Hooks only observe: they return None, read detached tensors under `torch.no_grad()` and never break the
user's forward or backward (an exception is recorded as an internal error).
"""

import math
from typing import Any

import torch

try:  # imported as part of the trainsleuth package (live mode)
    from . import _ts_probe_origins as origins
    from . import _ts_probe_tensors as tens
    from ._ts_probe_measure import RELU_TYPES, SAT_TYPES
except ImportError:  # imported from the runner's own folder (user's interpreter)
    import _ts_probe_origins as origins  # type: ignore[no-redef]
    import _ts_probe_tensors as tens  # type: ignore[no-redef]
    from _ts_probe_measure import RELU_TYPES, SAT_TYPES  # type: ignore[no-redef]

MAX_EVENTS = 50000


class HooksMixin:
    """Forward and gradient hooks; expects the `Recorder` attributes it touches."""

    # set by Recorder.__init__ and its other parts
    _activation: Any
    active: Any
    _bclock: Any
    _cache: Any
    calls: Any
    _clock: Any
    detail: Any
    _discard_sample: Any
    eval_during_training: Any
    _events: Any
    first_order: Any
    grad_only: Any
    _has_params: Any
    in_closure: Any
    _input_stats: Any
    _inputs_seen: Any
    _internal: Any
    lazy_finite: Any
    _loss_op: Any
    _loss_seen: Any
    measure_scale: Any
    mode_modules: Any
    model: Any
    _module_input: Any
    module_input_rms: Any
    names: Any
    _op_found: Any
    _order: Any
    _output_scale: Any
    owner: Any
    _param_nf_t: Any
    _root_calls: Any
    params: Any
    paused: Any
    _producers: Any
    pstats: Any
    root_call: Any
    sample_activations: Any
    _stack: Any
    step: Any
    _step_discards: Any
    steps_done: Any
    _top_nodes: Any
    watch_producers: Any

    def before_backward(self, loss):
        """Called with the loss before its backward: the operation of the loss code that made a
        non-finite loss, and hooks that name the loss code's operation whose backward turns a finite
        gradient non-finite (the loss code's graph only, down to the models' outputs: a few nodes)."""
        try:
            if not isinstance(loss, torch.Tensor) or loss.grad_fn is None:
                self.resolve()
                return
            self.resolve(force=not tens.tensor_finite(loss))
            if not tens.tensor_finite(loss):
                if self._loss_op is None:
                    self._loss_op = origins.nonfinite_op(loss, stop=self._top_nodes)
                return
            origins.watch_loss_backward(self, loss.grad_fn, self._top_nodes)
        except Exception as exc:
            self._internal(exc)

    def _finite_cached(self, t):
        key = id(t)
        hit = self._cache.get(key)
        ver = tens.version(t)
        if hit is not None and hit[0] is t and hit[1] == ver:
            return hit[2]
        res = tens.tensor_finite(t)
        self._cache[key] = (t, ver, res)
        return res

    def _tree_finite(self, obj):
        return all(self._finite_cached(t) for t in tens.float_tensors(obj))

    def _pre(self, module, args, kwargs):
        if not self.active or self.paused or (self.grad_only and not torch.is_grad_enabled()):
            return None
        try:
            name = self.names.get(id(module), "?")
            if len(self._events) >= MAX_EVENTS:
                self._stack.append(None)
                return None
            parent = self._stack[-1] if self._stack else None
            idx = len(self._events)
            ev = {
                "name": name,
                "parent": parent,
                "depth": len(self._stack),
                "in_finite": None if self.lazy_finite else self._tree_finite((args, kwargs)),
                "out_finite": None,
                "done": None,
                "in_grad_nf": None,
                "out_grad_nf": None,
                "out_grad_seen": False,
            }
            if self.lazy_finite:
                ev["_in"] = list(tens.float_tensors((args, kwargs)))
            self._events.append(ev)
            self._stack.append(idx)
            if module is self.model:
                self._root_calls += 1
                if self._root_calls == 1 and not self._inputs_seen and (args or kwargs):
                    self._inputs_seen = True  # the first call with inputs (the observer may join mid-call)
                    self._input_stats(args, kwargs)
                    if self.root_call is None:
                        self.root_call = (args, kwargs)
                if torch.is_grad_enabled():
                    self._check_train_mode(module)
            if id(module) in self._has_params and name not in self.module_input_rms:
                self._module_input(name, args)
            if self.detail and torch.is_grad_enabled():
                for t in tens.float_tensors((args, kwargs)):
                    if t.requires_grad and t.grad_fn is not None:
                        t.register_hook(self._grad_hook(idx, "in"))
        except Exception as exc:  # never break the user's forward
            self._internal(exc)
        return None

    def _post(self, module, args, kwargs, output):
        if not self.active or self.paused or (self.grad_only and not torch.is_grad_enabled()):
            return None
        try:
            idx = self._stack.pop() if self._stack else None
            if idx is None:
                return None
            ev = self._events[idx]
            name = ev["name"]
            if self.lazy_finite:
                ev["_out"] = list(tens.float_tensors(output))
                ev["_module"] = module
            else:
                ev["out_finite"] = self._tree_finite(output)
                self._judge_event(ev, module, list(tens.float_tensors((args, kwargs))), output)
            ev["done"] = self._clock
            self._clock += 1
            self.calls[name] = self.calls.get(name, 0) + 1
            if name not in self.first_order:
                self.first_order[name] = self._order
                self._order += 1
            tname = type(module).__name__
            if (tname in RELU_TYPES or tname in SAT_TYPES) and (
                self.measure_scale or not self.sample_activations
            ):
                self._activation(name, tname, output)
            if self.measure_scale and id(module) in self._has_params:
                self._output_scale(name, output)
            top = ev["parent"] is None  # a model's own output: its gradient hook says whether the
            # gradient entering the model from the loss code is already non-finite (cheap: one per call)
            if self.watch_producers or ((self.detail or top) and torch.is_grad_enabled()):
                for t in tens.float_tensors(output):
                    if t.requires_grad and t.grad_fn is not None:
                        if self.watch_producers:
                            self._producers.setdefault(id(t.grad_fn), (t.grad_fn, name))
                        if top:
                            self._top_nodes.append(t.grad_fn)
                        if (self.detail or top) and torch.is_grad_enabled():
                            t.register_hook(self._grad_hook(idx, "out"))
            if module is self.model:
                loss = tens.extract_loss(output)
                if loss is not None:
                    self._loss_seen = loss
        except Exception as exc:
            self._internal(exc)
        return None

    def _judge_event(self, ev, module, inputs, output):
        """A module with finite inputs and a non-finite output: its own parameters, and the operation."""
        if not (ev["out_finite"] is False and ev["in_finite"]):
            return
        name = ev["name"]
        if id(module) in self._has_params:
            with torch.no_grad():
                ev["bad_params"] = [
                    f"{name}.{pn}" if name else pn
                    for pn, p in module.named_parameters(recurse=False)
                    if not tens.tensor_finite(p)
                ]
        if not self._op_found:  # the operation inside it that made the value (first module only)
            self._op_found = True
            ev["op"] = origins.nonfinite_op(output, stop=[t.grad_fn for t in inputs])

    def resolve(self, force=False):
        """`lazy_finite`: judge the recorded forward passes now. Only when a model's output (or, `force`,
        the loss) is not finite are the modules checked one by one; call before backward (the graph the
        operation is traced in is still there) and before the optimizer step (parameters unchanged)."""
        pending = [e for e in self._events if "_out" in e]
        if not pending:
            return
        try:
            top = [e for e in pending if e["parent"] is None]
            bad = force or any(not self._tree_finite(e["_out"]) for e in top)
            # children before their parents (the events are in call order): the innermost module that
            # made the value is judged first and gets the operation, as in the eager hooks' post-order
            for e in reversed(pending):
                if bad:
                    e["in_finite"] = self._tree_finite(e["_in"])
                    e["out_finite"] = self._tree_finite(e["_out"])
                    self._judge_event(e, e["_module"], e["_in"], e["_out"])
                else:
                    e["in_finite"] = e["out_finite"] = True
        except Exception as exc:
            self._internal(exc)
        finally:
            for e in pending:
                for key in ("_in", "_out", "_module"):
                    e.pop(key, None)

    def _check_train_mode(self, model):
        """A training step (gradients enabled) with the whole model in eval mode: dropout and
        batch norm behave as at evaluation time."""
        if model.training or self.eval_during_training is not None or not self.mode_modules:
            return
        off = [n for n, m in self.mode_modules if not m.training]
        if off:
            self.eval_during_training = {"step": self.step, "modules": off[:10], "n_modules": len(off)}

    def _grad_hook(self, idx, kind):
        def hook(grad):
            if not self.active_backward():
                return None
            try:
                t = self._bclock
                self._bclock += 1
                if idx >= len(self._events):
                    return None
                ev = self._events[idx]
                if kind == "out":
                    ev["out_grad_seen"] = True
                if not tens.tensor_finite(grad):
                    key = "out_grad_nf" if kind == "out" else "in_grad_nf"
                    if ev[key] is None:
                        ev[key] = t
            except Exception as exc:
                self._internal(exc)
            return None

        return hook

    def active_backward(self):
        return self.active and not self.paused

    def _param_hook(self, i):
        def hook(grad):
            if not self.active or self.paused:
                return None
            try:
                s = self.pstats[i]
                p = self.params[i][1]
                # a closure's first evaluation of a new step must find .grad cleared as well (L-BFGS's
                # closure without zero_grad sums every evaluation into the direction it searches)
                if not s.fired and p.grad is not None and self.steps_done > 0:
                    with torch.no_grad():
                        if bool(tens.stored_values(p.grad.detach()).ne(0).any()):
                            s.stale = True
                if s.fires and s.sumsq > 0 and not self.in_closure and self._discarded(i, p):
                    self._step_discards += 1
                s.fired = True
                s.fires += 1
                with torch.no_grad():  # a sparse gradient is read through its stored values
                    n = float(torch.linalg.vector_norm(tens.stored_values(grad.detach()).float()))
                if not math.isfinite(n) and not tens.tensor_finite(grad):
                    s.nonfinite = True
                    owner = self.owner[i]
                    if owner not in self._param_nf_t:
                        self._param_nf_t[owner] = self._bclock
                    self._bclock += 1
                else:
                    s.sumsq += n * n
            except Exception as exc:
                self._internal(exc)
            return None

        return hook

    def _discarded(self, i, p):
        """A later backward of the same step finds the earlier backward's gradient gone: cleared between
        micro-batches (zero_grad inside the accumulation loop). `.grad` of None is free to check; an
        all-zero `.grad` is checked on a few parameters only."""
        if p.grad is None:
            return True
        if i in self._discard_sample:
            with torch.no_grad():
                return not bool(tens.stored_values(p.grad.detach()).ne(0).any())
        return False

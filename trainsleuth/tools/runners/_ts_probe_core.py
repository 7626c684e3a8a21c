"""Gradient-probe instrumentation: the `Recorder` that hooks a model. Torch and the standard library only.

Used by the standalone `probe_runner.py` (in the user's interpreter) and by live mode
(`trainsleuth.probe.attach`). Hooks only observe: forward pre-hooks/hooks and tensor hooks
return None, statistics are computed on detached tensors under `torch.no_grad()`, nothing
draws random numbers and nothing is modified in place, so training is unchanged.
Full backward hooks are not used (they break on in-place activations).

Where NaN/Inf starts is worked out in `_ts_probe_origins`, the loss contract in
`_ts_probe_contract`, the per-module table in `_ts_probe_table`, the rules in `_ts_probe_rules`.
"""

import math

import torch

try:  # imported as part of the trainsleuth package (live mode)
    from . import _ts_probe_origins as origins
    from . import _ts_probe_summary as summarize
    from . import _ts_probe_tensors as tens
    from ._ts_probe_measure import RELU_TYPES, SAT_TYPES, MeasureMixin
    from ._ts_probe_table import module_table
    from ._ts_probe_util import _f
except ImportError:  # imported from the runner's own folder (user's interpreter)
    import _ts_probe_origins as origins  # type: ignore[no-redef]
    import _ts_probe_summary as summarize  # type: ignore[no-redef]
    import _ts_probe_tensors as tens  # type: ignore[no-redef]
    from _ts_probe_measure import RELU_TYPES, SAT_TYPES, MeasureMixin  # type: ignore[no-redef]
    from _ts_probe_table import module_table  # type: ignore[no-redef]
    from _ts_probe_util import _f  # type: ignore[no-redef]

MODE_TYPES = (
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "AlphaDropout",
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "SyncBatchNorm",
)
MAX_EVENTS = 50000

# kept for callers that used the old names
iter_tensors = tens.iter_tensors
tensor_finite = tens.tensor_finite
extract_loss = tens.extract_loss


def _put(lst, i, value, keep=False):
    """lst[i] = value, padding with None; with keep, an existing entry stays."""
    while len(lst) <= i:
        lst.append(None)
    if not keep:
        lst[i] = value


class _ParamStat:
    __slots__ = (
        "changed_steps",
        "cleared",
        "fired",
        "fires",
        "grad_norms",
        "init_rms",
        "none_steps",
        "nonfinite",
        "param_norms",
        "stale",
        "stale_steps",
        "sumsq",
        "update_ratios",
        "zero_steps",
    )

    def __init__(self):
        self.grad_norms = []
        self.param_norms = []
        self.update_ratios = []
        self.changed_steps = []
        self.stale_steps = []
        self.cleared = 0
        self.none_steps = 0
        self.zero_steps = 0
        self.init_rms = None
        self.fired = False
        self.fires = 0
        self.sumsq = 0.0
        self.nonfinite = False
        self.stale = False


def mode_sensitive_modules(model):
    """(name, module) of dropout layers with p > 0 and batch-norm layers: what model.train()/eval() changes."""
    out = []
    for name, m in model.named_modules():
        tname = type(m).__name__
        if tname in MODE_TYPES or (tname.endswith("Dropout") and hasattr(m, "p")):
            if "Dropout" in tname and not getattr(m, "p", 0):
                continue
            out.append((name, m))
    return out


class Recorder(MeasureMixin):
    """Hooks a model (and optionally its optimizer) and accumulates per-step statistics.

    Call `begin_step(k)` before a step's forward, `end_step(loss, snapshot)` after the optimizer
    step; `snapshot_params()` right before the optimizer step (or before a user step_fn) and
    `measure_updates(snapshot)` right after it enable update measurements. `summary()` returns the
    statistics `_ts_probe_rules.analyze` reads.
    """

    def __init__(self, model, optimizer=None, *, detail=True, history=None, grad_only=False, exclude=()):
        self.model = model
        self.optimizers = []
        self.detail = detail
        self.grad_only = grad_only  # ignore forward passes without gradients (evaluation inside training)
        self.auto_detail = False
        self.history = history  # keep at most this many steps of per-param history (live mode)
        self.names = {}  # type: dict
        self.types = {}
        for name, m in model.named_modules():
            if id(m) not in self.names:
                self.names[id(m)] = name
                self.types[name] = type(m).__name__
        self.params = []
        seen = set(exclude)  # ids of parameters another recorder already watches
        for name, p in model.named_parameters():
            if id(p) in seen:
                continue
            seen.add(id(p))
            self.params.append((name, p))
        self.pstats = [_ParamStat() for _ in self.params]
        with torch.no_grad():
            self.init_norms = [
                float(torch.linalg.vector_norm(p.detach().float())) if p.numel() else 0.0
                for _, p in self.params
            ]
        self.owner = [name.rpartition(".")[0] for name, _ in self.params]
        self._owned = {}  # type: dict
        for (name, _), owner in zip(self.params, self.owner):  # noqa: B905
            self._owned.setdefault(owner, []).append(name)
        self._has_params = {id(m) for m in model.modules() if any(True for _ in m.parameters(recurse=False))}
        self.opt_ids = {}
        self.opt_group = {}
        for opt in optimizer if isinstance(optimizer, (list, tuple)) else [optimizer]:
            if opt is not None:
                self.add_optimizer(opt)
        self.index_offset = 0  # live mode: per-step lists trimmed from the front by this many entries
        self.step_lrs = []  # per measured step: the learning rate of each param group when it stepped
        self._lrs = None
        self.mode_modules = mode_sensitive_modules(model)
        self.handles = []
        self.active = False
        self.paused = False
        self.step = -1
        self.last_step = None
        self.steps_done = 0
        self.losses = []
        self.loss_terms = {}
        self.global_grad_norms = []
        self.predicted_changes = []  # per step: sum over parameters of grad . dW (first-order loss change)
        self.micro_backwards = []  # per step: backward passes that reached the parameters
        self.first_order = {}
        self.calls = {}
        self.act = {}
        self.inputs = []
        self.module_input_rms = {}
        self.root_call = None
        self.eval_during_training = None
        self.forward_origin = None
        self.backward_origin = None
        self.nonfinite_step = None
        self.nonfinite_index = None
        self.loss_op = None  # the loss code's operation that made the first non-finite loss
        self.model_output_finite = {}
        self.term_grad_norms = {}
        self.shared_params = 0
        self.updates_measured = False
        self.watch_producers = False
        self._producers = {}
        self._measured_step = None
        self.internal_errors = []
        self.measure_scale = False  # record each module's output RMS (the observer: first and last step)
        self.out_rms = {}
        self.measured_at = []  # the steps (counted from the first) whose updates were measured
        # cheaper observation of a real loop (the observer): the first-order loss change (for a fixed batch
        # only), activation statistics only on `measure_scale` steps, module finiteness checked only when
        # the loss or a model's output is not finite (`lazy_finite`, resolved before backward)
        self.predict_change = True
        self.sample_activations = False
        self.lazy_finite = False
        self.in_closure = False  # inside optimizer.step(closure): backward passes re-evaluate, not accumulate
        self.discards = []  # per step: backward passes that found an earlier backward's gradient cleared
        self._step_discards = 0
        sample = [i for i, (_, p) in enumerate(self.params) if p.requires_grad and p.dim() >= 2]
        self._discard_sample = set(sample[:3])
        self._inputs_seen = False
        self._order = 0
        self._reset_step_state()

    @property
    def optimizer(self):
        """The first optimizer (the entrypoint probe and live mode have one)."""
        return self.optimizers[0] if self.optimizers else None

    def add_optimizer(self, opt):
        """Another optimizer that trains some of the parameters; its groups continue the group numbering."""
        if any(o is opt for o in self.optimizers):
            return
        base = sum(len(o.param_groups) for o in self.optimizers)
        self.optimizers.append(opt)
        for gi, g in enumerate(opt.param_groups):
            for p in g["params"]:
                self.opt_ids[id(p)] = g.get("lr")
                self.opt_group[id(p)] = base + gi

    def _groups(self):
        return [g for o in self.optimizers for g in o.param_groups]

    # ------------------------------------------------------------------ attach / detach

    def attach(self, skip_root=False, modules=True):
        """Hook every module (the root too, unless `skip_root`: live mode keeps the root's own) and parameter.

        `modules=False` hooks the parameters only (a compiled model: hooks added inside it are not run)."""
        for m in self.model.modules() if modules else ():
            if skip_root and m is self.model:
                continue
            self.handles.append(m.register_forward_pre_hook(self._pre, with_kwargs=True))
            self.handles.append(m.register_forward_hook(self._post, with_kwargs=True))
        for i, (_, p) in enumerate(self.params):
            if p.requires_grad:
                self.handles.append(p.register_hook(self._param_hook(i)))
        return self

    def detach(self):
        for h in self.handles:
            h.remove()
        self.handles = []

    # ------------------------------------------------------------------ helpers used by the contract checks

    def open_modules(self):
        return [i for i in self._stack if i is not None]

    def module_params(self, module):
        if module is None:
            return []
        prefix = module + "." if module else ""
        return [n for n, _ in self.params if n.startswith(prefix)]

    def producer(self, t):
        """The module whose output the tensor `t` was computed from (closest in the autograd graph)."""
        fn = getattr(t, "grad_fn", None)
        seen = 0
        queue = [fn] if fn is not None else []
        while queue and seen < 200:
            node = queue.pop(0)
            seen += 1
            hit = self._producers.get(id(node))
            if hit is not None and hit[0] is node:
                return hit[1]
            for nxt, _ in getattr(node, "next_functions", ()):
                if nxt is not None:
                    queue.append(nxt)
        return None

    def internal(self, exc):
        if len(self.internal_errors) < 5:
            first = (str(exc).strip().splitlines() or [""])[0]
            self.internal_errors.append(f"{type(exc).__name__}: {first[:300]}")

    _internal = internal

    # ------------------------------------------------------------------ per step

    def _reset_step_state(self):
        self._op_found = False
        self._top_nodes = []  # autograd nodes of the models' outputs: where the loss code begins
        self._loss_op = None
        self._loss_backward_op = None
        self._events = []
        self._stack = []
        self._cache = {}
        self._bclock = 0
        self._clock = 0
        self._root_calls = 0
        self._param_nf_t = {}
        self._loss_seen = None

    def begin_step(self, k):
        self.step = k
        self._reset_step_state()
        for s in self.pstats:
            s.fired = False
            s.fires = 0
            s.sumsq = 0.0
            s.nonfinite = False
            s.stale = False
        self._step_discards = 0
        self.active = True

    def snapshot_params(self, only=None):
        """Detached copies of the trainable parameters (taken right before an optimizer step);
        with `only` (a set of parameter ids), of those only and None for the others."""
        if self.optimizers:
            self._lrs = [_f(g.get("lr")) for g in self._groups()]
        with torch.no_grad():
            return [
                p.detach().clone() if p.requires_grad and (only is None or id(p) in only) else None
                for _, p in self.params
            ]

    def measure_updates(self, snapshot, accumulate=False):
        """Record this step's parameter updates against `snapshot`, while `.grad` still holds the
        gradients the optimizer used (call right after optimizer.step, e.g. from its post-hook).
        `accumulate`: a further optimizer of the same step (the step's first-order change adds up)."""
        if snapshot is None or (self._measured_step == self.step and not accumulate):
            return
        self._measured_step = self.step
        self.updates_measured = True
        self._measure_updates(snapshot, self.step, accumulate)

    def read_grads(self, only=None):
        """Take each parameter's gradient from `.grad` as the optimizer is about to use it (the sum of
        every backward since the last zero_grad, after clipping and unscaling), instead of what the
        parameter hooks saw in backward. Returns how many parameters a backward reached whose `.grad`
        was empty or zero by then (cleared between backward and the step)."""
        idx = [
            i for i, (_, p) in enumerate(self.params) if p.requires_grad and (only is None or id(p) in only)
        ]
        cleared = 0
        have = []
        for i in idx:
            s = self.pstats[i]
            g = self.params[i][1].grad
            if g is None:
                if s.fired and s.sumsq > 0:
                    cleared += 1
                    s.cleared += 1
                s.fired = False
                s.sumsq = 0.0
                s.nonfinite = False
            else:
                have.append((i, g))
        norms = _norms([g for _, g in have])
        for (i, _), n in zip(have, norms):  # noqa: B905
            s = self.pstats[i]
            if n == 0.0 and s.fired and s.sumsq > 0:
                cleared += 1
                s.cleared += 1
            s.fired = True
            s.fires = max(1, s.fires)
            s.nonfinite = not math.isfinite(n)
            s.sumsq = n * n if not s.nonfinite else 0.0
        return cleared

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

    def end_step(self, loss=None, snapshot=None, terms=None):
        """Close the step: record loss, gradients, updates and origins. Returns True if all finite."""
        self.active = False
        k = self.step
        self.last_step = k
        if loss is None:
            loss = self._loss_seen
        lval = None
        if loss is not None:
            try:
                lval = float(loss.detach().float()) if isinstance(loss, torch.Tensor) else float(loss)
            except Exception:
                lval = None
        self.losses.append(lval)
        for name, v in (terms or {}).items():
            try:
                self.loss_terms.setdefault(name, []).append(
                    float(v.detach().float()) if isinstance(v, torch.Tensor) else float(v)
                )
            except Exception:
                pass
        total_sq = 0.0
        any_nonfinite_grad = False
        fires = 0
        for i, (_, p) in enumerate(self.params):
            s = self.pstats[i]
            if not p.requires_grad:
                continue
            fires = max(fires, s.fires)
            if not s.fired:
                s.none_steps += 1
                s.grad_norms.append(None)
            else:
                n = math.sqrt(s.sumsq) if math.isfinite(s.sumsq) else float("inf")
                if s.nonfinite:
                    any_nonfinite_grad = True
                    n = float("nan")
                elif n == 0.0:
                    s.zero_steps += 1
                s.grad_norms.append(n)
                if math.isfinite(n):
                    total_sq += n * n
            if s.stale:
                s.stale_steps.append(k)
            if self.history and len(s.grad_norms) > self.history:
                del s.grad_norms[0]
        self.micro_backwards.append(fires)
        self.discards.append(self._step_discards)
        self._step_discards = 0
        self.global_grad_norms.append(math.sqrt(total_sq))
        if snapshot is not None and self._measured_step != k:
            self._measured_step = k
            self.updates_measured = True
            self._measure_updates(snapshot, k)
        _put(self.predicted_changes, self.steps_done - self.index_offset, None, keep=True)
        _put(self.step_lrs, self.steps_done - self.index_offset, None, keep=True)
        finite_loss = lval is None or math.isfinite(lval)
        self.resolve(force=not finite_loss)
        forward_bad = any(e["out_finite"] is False for e in self._events)
        root_bad = any(e["out_finite"] is False for e in self._events if e["parent"] is None)
        if root_bad is False and self._events:
            self.model_output_finite[str(k)] = True
        if any_nonfinite_grad and self.auto_detail:
            self.detail = True  # locate the origin on the next observed step
        if self.nonfinite_step is None and (not finite_loss or any_nonfinite_grad):
            self.nonfinite_step = k
            self.nonfinite_index = self.steps_done
            self.loss_op = self._loss_op
            if forward_bad and (not finite_loss or root_bad):
                self.forward_origin = origins.forward_origin(self, k)
            elif any_nonfinite_grad and finite_loss:
                self.backward_origin = origins.backward_origin(self, k)
        self.steps_done += 1
        ok = finite_loss and not any_nonfinite_grad
        self._events = []
        self._cache = {}
        self._producers = {}
        return ok

    def _measure_updates(self, snapshot, k, accumulate=False):
        idx = [i for i in range(len(self.params)) if snapshot[i] is not None]
        if not idx:
            return
        with torch.no_grad():
            olds = [snapshot[i] for i in idx]
            news = [self.params[i][1].detach() for i in idx]
            try:  # fused passes where the build supports them; the snapshot becomes the difference in place
                ons = [float(x) for x in torch._foreach_norm(olds)]
                torch._foreach_sub_(olds, news)
                dns = [float(x) for x in torch._foreach_norm(olds)]
            except Exception:
                ons = [float(torch.linalg.vector_norm(o.float())) for o in olds]
                for o, n in zip(olds, news):  # noqa: B905
                    o.sub_(n)
                dns = [float(torch.linalg.vector_norm(o.float())) for o in olds]
            dot = 0.0
            if self.predict_change:  # sum over parameters of grad . dW (olds holds -dW now)
                pairs = [
                    (self.params[i][1].grad.detach(), olds[j])
                    for j, i in enumerate(idx)
                    if dns[j] != 0.0
                    and self.params[i][1].grad is not None
                    and self.params[i][1].grad.shape == olds[j].shape
                ]
                if pairs:  # one synchronisation for the whole model, not one per parameter
                    dot = -float(torch.stack([tens.grad_dot(g, d) for g, d in pairs]).sum())
                del pairs
            numels = [o.numel() for o in olds]
            del olds, news
        at = self.steps_done - self.index_offset
        if not self.measured_at or self.measured_at[-1] != self.steps_done:
            self.measured_at.append(self.steps_done)
        if accumulate and at < len(self.predicted_changes) and self.predicted_changes[at] is not None:
            dot += self.predicted_changes[at]
        _put(self.predicted_changes, at, dot if math.isfinite(dot) and self.predict_change else None)
        _put(self.step_lrs, at, self._lrs)
        for j, i in enumerate(idx):
            s = self.pstats[i]
            on, dn = ons[j], dns[j]
            if s.init_rms is None:
                s.init_rms = on / math.sqrt(max(1, numels[j]))
            if dn != 0.0:  # exactly unchanged <=> the difference is all zeros
                s.changed_steps.append(k)
            s.param_norms.append(on)
            s.update_ratios.append(dn / on if on > 0 else None)
            if self.history:
                for lst in (s.param_norms, s.update_ratios):
                    if len(lst) > self.history:
                        del lst[0]

    # ------------------------------------------------------------------ hooks

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
            for e in pending:
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

    def reset_micro(self):
        """Forget this step's backward passes (a GradScaler skipped the optimizer step: the next backward
        starts the step again)."""
        for s in self.pstats:
            s.fired = False
            s.fires = 0
            s.sumsq = 0.0
            s.nonfinite = False
        self._step_discards = 0

    def _effective_lr(self, p):
        """The largest learning rate the parameter's group stepped with (a warmup starts at 0)."""
        gi = self.opt_group.get(id(p))
        used = [
            lrs[gi]
            for lrs in self.step_lrs
            if lrs and gi is not None and gi < len(lrs) and lrs[gi] is not None
        ]
        return max(used) if used else self.opt_ids.get(id(p))

    def trim(self, keep):
        """Keep only the last `keep` entries of every per-step list (live mode's bounded memory)."""
        drop = len(self.losses) - keep
        if drop <= 0:
            return
        for lst in (self.losses, self.global_grad_norms, self.micro_backwards, self.discards):
            del lst[:drop]
        for lst in (self.predicted_changes, self.step_lrs):
            del lst[: min(drop, len(lst))]
        self.index_offset += drop

    def peak_lrs(self):
        """Each param group's learning rate before any schedule (`initial_lr`, set by LR schedulers)."""
        if not self.optimizers:
            return None
        return [_f(g.get("initial_lr", g.get("lr"))) for g in self._groups()]

    def summary(self, *, mode="loss_fn", fixed_batch=True):
        return summarize.summary(self, mode=mode, fixed_batch=fixed_batch)


def _norms(grads):
    """Float norms of a list of gradients with one synchronisation (fused where the build allows)."""
    if not grads:
        return []
    try:
        with torch.no_grad():
            dense = [g if not g.is_sparse else g.coalesce().values() for g in grads]
            return torch.stack(
                [n.float().reshape(()) for n in torch._foreach_norm(dense, 2, dtype=torch.float32)]
            ).tolist()
    except Exception:
        out = []
        with torch.no_grad():
            for g in grads:
                g = g.coalesce().values() if g.is_sparse else g
                out.append(float(torch.linalg.vector_norm(g.detach().float())))
        return out


__all__ = [
    "RELU_TYPES",
    "SAT_TYPES",
    "Recorder",
    "extract_loss",
    "iter_tensors",
    "mode_sensitive_modules",
    "module_table",
    "tensor_finite",
]

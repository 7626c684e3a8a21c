"""Gradient-probe instrumentation: the `Recorder` that hooks a model. Torch and the standard library only.

Used by the standalone `probe_runner.py` (in the user's interpreter) and by live mode
(`trainsleuth.probe.attach`). Hooks only observe: forward pre-hooks/hooks and tensor hooks
return None, statistics are computed on detached tensors under `torch.no_grad()`, nothing
draws random numbers and nothing is modified in place, so training is unchanged.
Full backward hooks are not used (they break on in-place activations).

The module and gradient hooks are in `_ts_probe_hooks`, the update measurements in `_ts_probe_updates`,
where NaN/Inf starts is worked out in `_ts_probe_origins`, the loss contract in
`_ts_probe_contract`, the per-module table in `_ts_probe_table`, the rules in `_ts_probe_rules`.
"""

import math

import torch

try:  # imported as part of the trainsleuth package (live mode)
    from . import _ts_probe_origins as origins
    from . import _ts_probe_summary as summarize
    from . import _ts_probe_tensors as tens
    from ._ts_probe_hooks import HooksMixin
    from ._ts_probe_measure import RELU_TYPES, SAT_TYPES, MeasureMixin
    from ._ts_probe_table import module_table
    from ._ts_probe_updates import UpdatesMixin, _put
    from ._ts_probe_util import _f
except ImportError:  # imported from the runner's own folder (user's interpreter)
    import _ts_probe_origins as origins  # type: ignore[no-redef]
    import _ts_probe_summary as summarize  # type: ignore[no-redef]
    import _ts_probe_tensors as tens  # type: ignore[no-redef]
    from _ts_probe_hooks import HooksMixin  # type: ignore[no-redef]
    from _ts_probe_measure import RELU_TYPES, SAT_TYPES, MeasureMixin  # type: ignore[no-redef]
    from _ts_probe_table import module_table  # type: ignore[no-redef]
    from _ts_probe_updates import UpdatesMixin, _put  # type: ignore[no-redef]
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

# kept for callers that used the old names
iter_tensors = tens.iter_tensors
tensor_finite = tens.tensor_finite
extract_loss = tens.extract_loss


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


class Recorder(HooksMixin, UpdatesMixin, MeasureMixin):
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
        self._snap_pool = {}  # type: dict  # param index -> a snapshot buffer reused step to step
        self._snap_busy = set()  # type: set  # indices whose buffer an unmeasured snapshot still holds
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
        self.release_snapshots()

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
        self._release(snapshot)
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

    def reset_micro(self):
        """Forget this step's backward passes (a GradScaler skipped the optimizer step: the next backward
        starts the step again)."""
        for s in self.pstats:
            s.fired = False
            s.fires = 0
            s.sumsq = 0.0
            s.nonfinite = False
        self._step_discards = 0

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

"""The gradient probe as a plugin of the observer (`_ts_observe.py`): the user's real loop, no replay.

Every model an optimizer trains (an outermost module called by the run whose parameters an optimizer
holds; DDP/DataParallel and torch.compile wrappers unwrapped) gets the probe's shared `Recorder`
(`_ts_probe_core`) for the observed iterations, and one set of rules (`_ts_probe_rules.analyze`)
judges the result, as in the entrypoint probe and live mode. What this plugin adds:

- the gradient is read from `.grad` at each optimizer's pre-step hook (the real accumulated gradient,
  after clipping and unscaling), the update around each optimizer's step;
- the loss of each iteration is what the run backpropagated (the observer sees every scalar backward);
- the loss and label contract (`_ts_probe_contract.LossWatch`) is watched during the first observed
  iteration, from the first model's forward to its backward, with the batches a DataLoader yields and
  the model's inputs counted as the batch;
- buffers and frozen tensors of every model that ran: whether they changed (`StateWatch`).

The observed batches change from step to step: rules that need one fixed batch (a loss that does not
go down) are not applied, and the report says so. A compiled model's inside is not hooked (hooks added
inside a compiled graph are not run): its gradients and updates are read at the step, its activations
are not seen, and the report says so.
"""

import math

import _ts_probe_contract as contract
import _ts_probe_core as core
import _ts_probe_rules as rules
import _ts_probe_tensors as tens
import torch
from _ts_probe_observed import StateWatch, _pre, clean_name, merge, param_rows, unwrap
from _ts_probe_watch import RegimeWatch

MAX_NOTES = 30
LARGE_MODEL = 5_000_000  # weights; above it updates are measured every other observed step


def make(observer, options):
    return ProbePlugin(observer, options)


class Watched:
    """One model the optimizers train, with its recorder."""

    def __init__(self, root, module, wrappers, rec):
        self.root = root  # the observer's RootInfo (label, the module called)
        self.module = module  # the model inside its wrappers
        self.wrappers = wrappers
        self.compiled = "torch.compile" in wrappers or any(
            type(m).__name__ == "OptimizedModule" for m in module.modules()
        )
        self.rec = rec
        self.first_step = None  # the first observed position it took part in
        self._numel = None  # its trainable weights, counted once

    def describe(self):
        params = [p for _, p in self.rec.params]
        return {
            "label": self.root.label,
            "type": type(self.module).__name__,
            "wrappers": self.wrappers,
            "compiled": self.compiled,
            "params": int(sum(p.numel() for p in params)),
            "trainable": int(sum(p.numel() for p in params if p.requires_grad)),
            "tensors": len(params),
        }


class ProbePlugin:
    def __init__(self, observer, options):
        self.obs = observer
        self.options = options
        self.watched = []
        self._considered = {}  # id(root module) -> Watched or None (a model no optimizer trains)
        self._owned = set()  # ids of parameters some recorder watches
        self.state = StateWatch(torch)
        self._state_roots = set()
        self.positions = []  # observed iteration numbers, in order (recorder step i is positions[i])
        self.pos = None
        self.snaps = {}
        self.cleared = 0
        self.completed = 0  # observed iterations that ended
        self.loss_watch = None
        self._watch_done = False
        self.contract_findings = []
        self._pending_batches = []
        self.skipped = 0  # optimizer steps a GradScaler skipped during the observed steps
        self._scaler_patch = None
        self._iter_losses = []  # (optimizer index or None, loss) of the open iteration's backward passes
        self._closure = {}  # optimizer index -> closure steps seen (optimizer.step(closure): LBFGS)
        self._closure_open = set()
        self._closure_evals = 0  # backward passes inside the open closure step
        self.multi_eval = False  # a closure evaluated several times per step (LBFGS): a quasi-Newton step
        self._stepped = set()  # optimizers that stepped during the observed steps
        self.notes = []
        self.opt_losses = []  # per observed iteration: {optimizer index: summed loss}
        self._loader_patch = None
        # what tells the regime (adversarial pair, RL, closure, KL, EMA/target copies, frozen teachers):
        # every root the run calls is a unit, trained or not (`_ts_probe_watch`)
        self.regime = RegimeWatch([], fires=self._fires, internal=self._regime_error)

    # ------------------------------------------------------------------ set-up and discovery

    def setup(self):
        self._patch_loader()
        self._patch_scaler()

    def _patch_scaler(self):
        """A GradScaler that skips the optimizer step (inf/NaN gradients at its scale) starts the step
        again: that step's backward passes and losses are forgotten, not accumulated."""
        cls = getattr(getattr(torch, "amp", None), "GradScaler", None)
        if cls is None or not hasattr(cls, "step"):
            return
        original = cls.step
        plugin = self

        def step(scaler, optimizer, *args, **kwargs):
            before = sum(i.steps for i in plugin.obs.optimizers)
            out = original(scaler, optimizer, *args, **kwargs)
            if sum(i.steps for i in plugin.obs.optimizers) == before:
                plugin._skipped_step()
            return out

        step.__wrapped__ = original  # type: ignore[attr-defined]
        cls.step = step
        self._scaler_patch = (cls, original)

    def _skipped_step(self):
        if self.pos is None or not self.obs._observed(self.obs.k):
            return
        self.skipped += 1
        self._iter_losses = []
        for w in self.watched:
            if w.rec.active:
                w.rec.reset_micro()

    def _patch_loader(self):
        """The loss contract opens at the first batch a DataLoader yields in the first observed iteration,
        so the batch's tensors (and what is computed from them, e.g. moved to a device) count as targets."""
        try:
            from torch.utils.data import dataloader
        except Exception:
            return
        base = dataloader._BaseDataLoaderIter
        original = base.__next__
        plugin = self

        def next_(it):
            batch = original(it)
            if not plugin._watch_done and plugin.pos is not None and plugin.obs._observed(plugin.obs.k):
                plugin._open_loss_watch(None, batch)
            return batch

        next_.__wrapped__ = original  # type: ignore[attr-defined]
        base.__next__ = next_  # type: ignore[method-assign]
        self._loader_patch = (base, original)

    def _held(self):
        ids = set()  # type: set
        for info in self.obs.optimizers:
            opt = info.optimizer
            if opt is not None:
                ids.update(id(p) for g in opt.param_groups for p in g["params"])
        return ids

    def _consider(self, root, held=None):
        """A recorder for `root` if an optimizer trains it (once an optimizer holds one of its parameters)."""
        known = self._considered.get(id(root.module))
        if known is not None:
            return known
        module, wrappers = unwrap(root.module)
        held = self._held() if held is None else held
        if not any(id(p) in held for p in module.parameters()):
            return None  # maybe later: an optimizer built after the first forward
        inside = [w for w in self.watched if any(m is module for m in w.module.modules())]
        if inside:  # a submodule of a model already watched, called on its own
            self._considered[id(root.module)] = inside[0]
            return inside[0]
        opts = [i.optimizer for i in self.obs.optimizers if i.optimizer is not None]
        rec = core.Recorder(module, opts, detail=False, grad_only=True, exclude=self._owned)
        rec.auto_detail = False
        rec.lazy_finite = (
            True  # module-by-module NaN checks only when a model's output or the loss is not finite
        )
        rec.sample_activations = True  # dead/saturated units from the first and last observed steps
        rec.predict_change = False  # the first-order loss change serves the fixed-batch rule only
        self._owned.update(id(p) for _, p in rec.params)
        w = Watched(root, module, wrappers, rec)
        self.watched.append(w)
        self._considered[id(root.module)] = w
        if w.compiled:
            self._note(
                f"{root.label} is compiled (torch.compile): hooks inside compiled code are not run, so its "
                "activations, dead units and where a NaN starts in its forward were not seen; its gradients, "
                "updates and buffers were read at the optimizer step."
            )
        return w

    def _track_state(self, root):
        if id(root.module) in self._state_roots:
            return
        self._state_roots.add(id(root.module))
        module, _ = unwrap(root.module)
        self.state.add(root.label, module)

    # ------------------------------------------------------------------ observer events

    def optimizer_created(self, info):
        for w in self.watched:
            if info.optimizer is not None:
                w.rec.add_optimizer(info.optimizer)

    def root_seen(self, info):
        if not self.obs._observed(self.obs.k):
            return
        self.regime.add_unit(info.label, unwrap(info.module)[0])
        self._track_state(info)
        w = self._consider(info)
        if w is None or w.rec.handles:
            return
        self._start(w)
        if w.module is info.module and not w.compiled and torch.is_grad_enabled():
            # this call has begun: its own pre-hooks have run already; record its start by hand
            w.rec._pre(info.module, tuple(info.args or ()), {})
            self._open_loss_watch(w, (tuple(info.args or ()),))

    def begin(self, k):
        self._iter_losses = []
        self.pos = len(self.positions)
        self.positions.append(k)
        self.opt_losses.append({})
        held = self._held()
        for root in self.obs.roots:
            self._track_state(root)
            self._consider(root, held)
        for w in self.watched:
            self._start(w)
        self._regime_begin()

    def _start(self, w):
        if not w.rec.handles:
            w.rec.attach(modules=not w.compiled)
            if not w.compiled:
                w.rec.handles.append(w.module.register_forward_pre_hook(self._root_pre, with_kwargs=True))
        if w.first_step is None:
            w.first_step = self.pos
        if w.rec.step != self.pos or not w.rec.active:
            w.rec.begin_step(self.pos)
            w.rec.measure_scale = self.pos == 0 or self.positions[-1] == self.obs.last

    def _root_pre(self, module, args, kwargs):
        if self.loss_watch is None and not self._watch_done and torch.is_grad_enabled():
            self._open_loss_watch(None, (args, kwargs))
        if self.loss_watch is not None:
            self.loss_watch[0]._taint_all((args, kwargs))  # the model's inputs are the batch too
        return None

    def _open_loss_watch(self, w, batch):
        """The loss contract (first observed iteration), from its batch or first forward to its backward."""
        if self._watch_done or self.loss_watch is not None or self.pos is None:
            return
        self.regime.close_window()  # the loss watch's mode goes above, never over, the regime's window
        w = w or (self.watched[0] if self.watched else None)
        if w is None:  # no model known yet (its first forward comes after the batch): keep the batch
            self._pending_batches = [*self._pending_batches[-3:], batch]
            return
        self._watch_done = True
        batch = [batch, self._pending_batches]
        self._pending_batches = []
        try:
            watch = contract.LossWatch(w.rec, batch, 0 if self.positions[-1] == 1 else self.pos)
            watch.record_violations = True
            watch.__enter__()
            self.loss_watch = (watch, w)
            w.rec.watch_producers = True
        except Exception as exc:
            self._note(f"the loss contract was not checked: {type(exc).__name__}: {exc}")

    def _close_loss_watch(self):
        """Stop the loss contract check; pop it off the mode stack when it is on top (a backward called
        through the mode itself runs with it popped: it is popped later, at the optimizer step)."""
        if self.loss_watch is None:
            return
        watch, w = self.loss_watch
        if watch.active:
            watch.active = False
            w.rec.watch_producers = False
            self.contract_findings += list(watch.findings)
        try:
            stack = torch.overrides._get_current_function_mode_stack()
        except Exception:
            stack = []
        if stack and stack[-1] is watch:
            watch.__exit__(None, None, None)
            self.loss_watch = None
        elif not any(m is watch for m in stack):
            return  # inside its own __torch_function__ (popped for the call): try again later
        else:  # another mode above it: never pop someone else's mode; it stays, inert
            self.loss_watch = None

    def backward(self, k, loss):
        self._close_loss_watch()
        if self._closure_open:  # a further evaluation inside optimizer.step(closure): not the step's loss
            self._closure_evals += 1
        else:
            self._iter_losses.append((None, loss))
        t = self.obs.backward_tensor
        for w in self.watched:
            if w.rec.active:
                w.rec.before_backward(t if t is not None else loss)

    def before_step(self, info, k):
        opt = info.optimizer
        if opt is None:
            return
        self._close_loss_watch()
        held = self._held()
        for root in self.obs.roots:  # a model whose optimizer was built after its first forward
            if self._considered.get(id(root.module)) is None:
                w = self._consider(root, held)
                if w is not None:
                    self._start(w)
        ids = {id(p) for g in opt.param_groups for p in g["params"]}
        self._stepped.add(info.index)
        # optimizer.step(closure): the observer calls this after the closure's first evaluation (this
        # step's gradient, weights not moved yet); later evaluations (LBFGS) re-evaluate, they do not add up
        closure = info.closure_steps != self._closure.get(info.index, 0)
        self._closure[info.index] = info.closure_steps
        if closure:
            self._closure_open.add(info.index)
        for w in self.watched:
            w.rec.add_optimizer(opt)
            if not any(id(p) in ids for _, p in w.rec.params):
                continue
            self.cleared += w.rec.read_grads(only=ids)
            w.rec.in_closure = closure
            if self._measure_updates_now(w):
                self.snaps[(info.index, id(w))] = w.rec.snapshot_params(only=ids)

    def _measure_updates_now(self, w):
        """Updates of a large model (over LARGE_MODEL weights) are measured every other observed step:
        the copy of every weight before the step is most of the probe's cost on such a model (1.26x a plain
        step on a 10M transformer, `benchmarks/observe.py`); gradients are still read at every step."""
        n = w._numel
        if n is None:
            n = w._numel = sum(p.numel() for _, p in w.rec.params)
            if n > LARGE_MODEL:
                self._note(
                    f"{w.root.label} has {n:,} weights: its updates were measured at every other observed step "
                    "(gradients at every step)"
                )
        return n <= LARGE_MODEL or (self.pos or 0) % 2 == 0

    def after_step(self, info, k):
        closure = info.index in self._closure_open
        self._closure_open.discard(info.index)
        if closure:
            self.multi_eval = self.multi_eval or self._closure_evals > 0
            self._closure_evals = 0
        for w in self.watched:
            w.rec.in_closure = False
            snap = self.snaps.pop((info.index, id(w)), None)
            if snap is not None:
                w.rec.measure_updates(snap, accumulate=True)

    def end(self, k):
        self._close_loss_watch()
        owners = self._loss_owners(k)
        total = None
        per_opt = {}  # type: dict
        for i, (_, loss) in enumerate(self._iter_losses):
            v = _num(loss)
            if v is None:
                continue
            total = v if total is None else total + v
            key = owners[i] if i < len(owners) else None
            per_opt[key] = per_opt.get(key, 0.0) + v
        self._iter_losses = []
        if self.opt_losses:
            self.opt_losses[-1] = per_opt
        self.completed += 1
        for w in self.watched:
            if w.rec.active:
                w.rec.end_step(total)
        self.regime.end_step(self.pos)
        if k >= self.obs.last:
            self._detach()

    def _loss_owners(self, k):
        """The optimizer each backward of iteration k fed (the observer's record), in order."""
        rec = self.obs.iterations[-1] if self.obs.iterations else {}
        if rec.get("step") != k:
            return []
        owners = [b.get("optimizer") for b in rec.get("backward", [])]
        return owners[-len(self._iter_losses) :] if self._iter_losses else []

    def _detach(self):
        for w in self.watched:
            w.rec.detach()
            w.rec.active = False
        self.regime.detach()

    # ------------------------------------------------------------------ the regime's observations

    def _regime_begin(self):
        for root in self.obs.roots:
            module, _ = unwrap(root.module)
            self.regime.add_unit(root.label, module)
        if not self.regime._attached:
            self.regime.attach()
        self.regime.begin_step(self.pos)

    def _fires(self):
        return {id(p): s.fires for w in self.watched for (_, p), s in zip(w.rec.params, w.rec.pstats)}  # noqa: B905

    def _regime_error(self, exc):
        self._note(f"the regime watch failed: {type(exc).__name__}: {exc}"[:300])

    def _regime_observations(self, watched, prefix):
        """stats["regime_obs"], its parameters named as the merged statistics name them."""
        name_of, prefixes = {}, {}  # type: dict, dict
        trained = {id(w.module) for w in watched}
        for w in watched:
            prefixes[w.root.label] = w.root.label + "." if prefix else ""
            for n, p in w.rec.params:
                name_of.setdefault(id(p), _pre(w.root.label, n, prefix) if prefix else clean_name(n))
        for label, module in self.regime.units:
            if id(module) in trained:
                continue
            prefixes.setdefault(label, label + ".")
            for n, p in module.named_parameters():
                name_of.setdefault(id(p), f"{label}.{clean_name(n)}")
        return self.regime.observations(name_of, prefixes)

    # ------------------------------------------------------------------ the report

    def _note(self, text):
        if text not in self.notes and len(self.notes) < MAX_NOTES:
            self.notes.append(text)

    def finish(self, reason):
        self._close_loss_watch()
        self._detach()
        if self._loader_patch is not None:
            base, original = self._loader_patch
            base.__next__ = original
        if self._scaler_patch is not None:
            cls, original = self._scaler_patch
            cls.step = original
        watched = [w for w in self.watched if w.rec.steps_done > 0]
        notes = list(self.notes)
        section = {
            "models": [w.describe() for w in self.watched],
            "steps": self.positions[: self.completed],
            "state": self.state.report(prefix=len(self.obs.roots) > 1),
            "fixed_batch": False,
        }
        if not watched:
            held = self._held()
            bare = {"regime_obs": self._regime_observations([], False), "params": []}
            bare["regimes"] = section["regimes"] = rules.regimes.detect(bare)
            section["regime"] = rules.regimes.sentence(section["regimes"])
            # a model that runs and gets gradients no optimizer holds (its optimizer built over a module
            # replaced since) is the finding, not a reason to judge nothing
            unheld = [self._at_iteration(f) for f in rules.regime_rules.unheld_params_not_updated(bare)]
            section["findings"] = list(self.contract_findings) + unheld
            section["notes"] = [
                *notes,
                "no model the optimizers train completed an observed step"
                + ("" if held else " (no optimizer holds any parameter)")
                + ": gradients were not judged",
            ]
            return section
        prefix = len(watched) > 1
        stats = merge(
            [(w.root.label, w.rec.summary(mode="observed", fixed_batch=False)) for w in watched], prefix
        )
        stats["contract_findings"] = list(self.contract_findings)
        stats["regime_obs"] = self._regime_observations(watched, prefix)
        stats["regimes"] = rules.regimes.detect(stats)
        several = self._several_losses()
        stats["loss_trend"] = not several
        stats["single_optimizer"] = len(self._stepped) <= 1 and not self.multi_eval
        if self.multi_eval:  # a quasi-Newton step's size is set by its own search, not by a learning rate
            stats["update_ratio_rules"] = False
        self._coverage_notes(notes, watched, several)
        found = [self._at_iteration(f) for f in rules.analyze(stats, notes)]
        section.update(
            {
                "regimes": stats["regimes"],
                "regime": rules.regimes.sentence(stats["regimes"]),
                "findings": found,
                "notes": notes,
                "losses": stats["losses"],
                "losses_by_optimizer": self._by_optimizer() if several else None,
                "lrs": [self._lrs(k) for k in section["steps"]],
                "global_grad_norms": stats["global_grad_norms"],
                "table": core.module_table(stats),
                "layer_grad_rms": rules.layer_grad_rms(stats),
                "params": param_rows(stats, found),
                "n_params": len(stats["params"]),
                "nonfinite": self._nonfinite(stats),
                "cleared_gradients": self.cleared,
                "internal_errors": stats.get("internal_errors", [])[:5],
            }
        )
        return section

    def _several_losses(self):
        keys = set()  # type: set
        for per_opt in self.opt_losses:
            keys.update(k for k in per_opt if k is not None)
        return len(keys) > 1

    def _by_optimizer(self):
        out = {}  # type: dict
        for i, per_opt in enumerate(self.opt_losses):
            for key, v in per_opt.items():
                out.setdefault(str(key), [None] * len(self.opt_losses))[i] = _f(v)
        return out

    def _lrs(self, k):
        for rec in self.obs.iterations:
            if rec.get("step") == k:
                return rec.get("lr")
        return None

    def _coverage_notes(self, notes, watched, several):
        notes.append(
            "The observed steps use the run's own batches (not one fixed batch): a rising or non-finite loss "
            "is judged, a loss that does not go down (loss_not_decreasing) is not."
        )
        if several:
            notes.append(
                "Several optimizers step on losses of their own (adversarial or alternating training): the "
                "loss trend was not judged; losses_by_optimizer holds each series."
            )
        held = self._held()
        orphans = held - self._owned
        if orphans:
            notes.append(
                f"{len(orphans)} parameter tensor(s) the optimizers hold belong to no model the run called "
                "(a module replaced after the optimizer was built, or a parameter used outside any module): "
                "they were not probed."
            )
        late = [w.root.label for w in watched if w.first_step not in (None, 0)]
        if late:
            notes.append(
                f"{', '.join(late)} joined after the first observed step; its earlier steps are missing."
            )
        if self.skipped:
            notes.append(
                f"The GradScaler skipped {self.skipped} optimizer step(s) (inf/NaN gradients at its scale, "
                "normal while it finds its scale): their backward passes and losses are not counted."
            )
        if self.multi_eval:
            notes.append(
                "The optimizer evaluates its closure several times per step (LBFGS style): the gradient and "
                "loss are the first evaluation's; update sizes were not judged against a learning rate (its "
                "own line search sets them)."
            )
        if self.cleared:
            notes.append(
                f"{self.cleared} time(s) a parameter's gradient was computed by backward but gone or zero at "
                "optimizer.step()."
            )

    def _at_iteration(self, f):
        """Findings count steps from the window's start; name the run's own iteration instead."""
        f = dict(f)
        step = f.get("step")
        if isinstance(step, int) and 0 <= step < len(self.positions):
            f["step"] = self.positions[step]
        ev = f.get("evidence") or {}
        if isinstance(ev.get("step"), int) and 0 <= ev["step"] < len(self.positions):
            f["evidence"] = dict(ev, step=self.positions[ev["step"]])
        return f

    def _nonfinite(self, stats):
        """Where the first NaN/Inf came from: module and operation, forward or backward."""
        for key, phase in (("forward_origin", "forward"), ("backward_origin", "backward")):
            origin = stats.get(key)
            if origin:
                step = origin.get("step")
                return {
                    "phase": phase,
                    "module": origin.get("module"),
                    "type": origin.get("type"),
                    "op": origin.get("op"),
                    "kind": origin.get("kind"),
                    "step": self.positions[step]
                    if isinstance(step, int) and step < len(self.positions)
                    else step,
                }
        if stats.get("nonfinite_step") is not None:
            step = stats["nonfinite_step"]
            return {
                "phase": "loss" if stats.get("loss_op") else None,
                "module": None,
                "op": stats.get("loss_op"),
                "step": self.positions[step]
                if isinstance(step, int) and step < len(self.positions)
                else step,
            }
        return None


def _num(x):
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v


def _f(x):
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


__all__ = ["ProbePlugin", "make", "tens"]

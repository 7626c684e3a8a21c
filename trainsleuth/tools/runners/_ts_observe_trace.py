"""The differential tracer: a plugin of the observer (`_ts_observe.py`). Torch and the standard library only.

`trace_diff` runs two variants of the user's training (two commits, two environments, two
commands) under this plugin and aligns the two traces. To make the variants comparable the tracer
pins randomness at `import torch`: it seeds torch, `random` and numpy, turns deterministic
algorithms on (warn only) and replaces the seed the user's code passes to `torch.manual_seed`,
`random.seed` or `numpy.random.seed` by a fixed one (the n-th call of each gets base + n), so two
seeds of the same code train identically and the seeds given are only noted.

It records, with the user's call site (`file:line in function`, workspace-relative) and the step:
- API calls: `torch.nn.init.*`, `torch.nn.utils.*` (spectral_norm, weight_norm, clip_grad_*,
  parametrize), `Module.train()/eval()`, `torch.compile`, `load_state_dict`, optimizer construction
  and `zero_grad`, `torch.distributed` collectives (result on return), seeds;
- in-place writes to a parameter or buffer outside the optimizer's step (`w.data.normal_()`);
- each outermost model call (site, train/eval mode, output summary) and, per call, each submodule's
  output summary; the loss of each backward;
- per optimizer step, each parameter's gradient, value after the step and whether the step changed
  it; at the end of each step, buffers and parameters no optimizer stepped;
- in the first `ops_steps` steps (and the set-up before them), every tensor operation through a
  TorchFunctionMode: its name, the module it ran in, its non-tensor arguments and an output summary,
  so a value difference can be localised below the module (stopped when `torch.compile` is called).
A tensor is never stored: see `_ts_trace_stats.summarise`. The trace is bounded (events per step and
in all); what was left out is counted.
"""

import os
import sys
import threading
import weakref
from typing import Any

import _ts_observe as core
import _ts_trace_api as api
import _ts_trace_stats as st
from _ts_trace_names import Names
from _ts_trace_ops import ForwardsAndOps
from _ts_trace_util import CLONE_LIMIT, MAX_EVENTS, _differs, _ptr, _quiet
from _ts_trace_wrappers import ApiWrappers


def make(observer, options):
    return Tracer(observer, options)


class Tracer(ApiWrappers, ForwardsAndOps, Names):
    def __init__(self, observer, options):
        self.obs = observer
        self.torch: Any = None
        self.seed = int(options.get("seed", 1234))
        self.pin_seeds = bool(options.get("pin_seeds", True))
        self.deterministic = bool(options.get("deterministic", True))
        self.ops_steps = max(0, int(options.get("ops_steps", 1)))
        self.max_events = int(options.get("max_events", MAX_EVENTS))
        guard = observer.config.get("guard") or {}
        self._prefixes = [
            p.rstrip(os.sep) + os.sep for p in (guard.get("mirror"), guard.get("workspace")) if p
        ]
        self.events = []
        self.seq = 0
        self.dropped = {}
        self.notes = []
        self.seeds = []
        self._busy = 0
        self._tid = threading.get_ident()
        self._pid = os.getpid()
        self._in_step = False
        self._trained = False
        self._ops_off = self.ops_steps == 0
        self._mode = None
        self._hooks = []
        self._stack = []  # (module, id) of the forwards that are running
        self._root_calls = 0
        self._fwd = {}  # (k, root call, id(module), training) -> event
        self._per_step = {}  # (k, kind) -> count
        self._storages = {}  # storage ptr -> weakref(tensor): parameters and buffers
        self._before = {}  # id(param) -> (stats, clone or None) at before_step
        self._grad_writers = {}  # id(gradient tensor) -> [collective events that wrote it] in this step
        self._stepped = set()  # id(param) stepped in the open iteration
        self._last = {}  # id(param) -> fingerprint at the end of the previous step (unstepped params)
        self._qual_cache = {}
        self._site_cache = {}

    # ------------------------------------------------------------------ observer interface

    def setup(self):
        torch = self.torch = self.obs.torch
        os.register_at_fork(after_in_child=self._forked)
        self._pin(torch)
        if self.deterministic:
            try:
                torch.use_deterministic_algorithms(True, warn_only=True)
                torch.backends.cudnn.deterministic = True
                torch.backends.cudnn.benchmark = False
            except Exception as exc:
                self.note(f"deterministic algorithms could not be turned on: {exc!r}")
        self._patch_apis(torch)
        if not self._ops_off:
            self._start_ops(torch)

    def root_seen(self, info):
        self._remember_state(info.module)

    @_quiet
    def optimizer_created(self, info):
        opt = info.optimizer
        if opt is None:
            return
        args = {k: api.describe(self.torch, v) for k, v in sorted(opt.defaults.items()) if k != "params"}
        groups = []
        for g in opt.param_groups:
            own = {
                k: api.describe(self.torch, v)
                for k, v in g.items()
                if k != "params" and _differs(opt.defaults.get(k, v), v)
            }
            groups.append({"params": len(g["params"]), **own})
        args["groups"] = groups
        params = [p for g in opt.param_groups for p in g["params"]]
        ev = self._event(
            "optimizer", info.type, site=self._rel(info.created_at), args=args, target=f"o{info.index}"
        )
        if ev is not None:
            ev["_params"] = [weakref.ref(p) for p in params[:4000]]

    def begin(self, k):
        if self._hooks or not self.obs._observed(k):
            return
        from torch.nn.modules import module as module_mod

        self._hooks.append(module_mod.register_module_forward_pre_hook(self._pre))
        try:
            self._hooks.append(module_mod.register_module_forward_hook(self._post, always_call=True))
        except TypeError:
            self._hooks.append(module_mod.register_module_forward_hook(self._post))

    @_quiet
    def backward(self, k, loss):
        self._trained = True
        self._event("backward", "loss.backward", out=st.summarise(self.torch, loss))

    @_quiet
    def before_step(self, info, k):
        opt = info.optimizer
        if opt is None:
            return
        self._in_step = True
        site, _ = self._sites()
        self._step_site = site
        total = sum(p.numel() for g in opt.param_groups for p in g["params"])
        keep = total <= CLONE_LIMIT
        for g in opt.param_groups:
            for p in g["params"]:
                before = st.summarise(self.torch, p)
                clone = p.detach().clone() if keep else None
                grad = None
                if p.grad is not None:
                    grad = st.summarise(self.torch, p.grad)
                    for ev in self._grad_writers.get(id(p.grad), ()):
                        ev["_grad_of"] = weakref.ref(p)
                        grad["by"] = f"{ev['fn']} at {ev.get('site')}"
                self._before[id(p)] = (before, clone, grad)

    @_quiet
    def after_step(self, info, k):
        self._in_step = False
        opt = info.optimizer
        if opt is None:
            return
        torch = self.torch
        for gi, g in enumerate(opt.param_groups):
            lr = api.describe(torch, g.get("lr"))
            for p in g["params"]:
                before, clone, grad = self._before.pop(id(p), (None, None, None))
                after = st.summarise(torch, p)
                delta = None
                if clone is not None:
                    try:
                        with torch.no_grad():
                            delta = st.scalar(torch.linalg.vector_norm(p.detach() - clone))
                    except Exception:
                        delta = None
                changed = bool(
                    before
                    and after
                    and (before.get("fp") != after.get("fp") or before.get("norm") != after.get("norm"))
                )
                if delta is not None:
                    changed = delta > 0
                self._stepped.add(id(p))
                self._last[id(p)] = after.get("fp") if after else None
                ev = self._event(
                    "param", f"{info.type}.step", site=self._step_site, target=p, out=after,
                    args={"lr": lr, "group": gi}, grad=grad, delta=delta, changed=changed,
                )  # fmt: skip
                if ev is not None:
                    ev["opt"] = info.index

    @_quiet
    def end(self, k):
        torch = self.torch
        seen_params = set()
        for root in self.obs.roots:
            for _, p in root.module.named_parameters():
                if id(p) in seen_params or id(p) in self._stepped:
                    seen_params.add(id(p))
                    continue
                seen_params.add(id(p))
                out = st.summarise(torch, p)
                fp = out.get("fp") if out else None
                previous = self._last.get(id(p), fp)
                self._last[id(p)] = fp
                self._event("param", "unstepped", target=p, out=out, changed=previous != fp)
            for _, b in root.module.named_buffers():
                if b is not None and b.numel() > 0:
                    self._event("buffer", "end_of_step", target=b, out=st.summarise(torch, b))
        self._stepped = set()
        self._grad_writers = {}
        self._root_calls = 0
        self._fwd = {}
        if k >= self.obs.start + self.ops_steps - 1:
            self._end_ops()

    def finish(self, reason):
        self._remove_mode(None)
        for hook in self._hooks:
            try:
                hook.remove()
            except Exception:
                pass
        self._hooks = []
        names = self._resolve()
        return {
            "version": 1,
            "events": self.events,
            "names": names,
            "seeds": self.seeds,
            "seed": self.seed,
            "pinned": self.pin_seeds,
            "dropped": self.dropped,
            "notes": self.notes,
            "ops_steps": self.ops_steps,
        }

    # ------------------------------------------------------------------ recording

    def note(self, text):
        if text not in self.notes and len(self.notes) < 50:
            self.notes.append(text)

    def _event(self, kind, fn, site=None, at=None, target=None, args=None, out=None, **extra):
        obs = self.obs
        k = obs.k
        if obs._finished or not obs._observed(k) or os.getpid() != self._pid:
            return None
        if len(self.events) >= self.max_events:
            self.dropped[kind] = self.dropped.get(kind, 0) + 1
            return None
        self.seq += 1
        ev = {"s": self.seq, "k": k, "kind": kind, "fn": fn}
        if not self._trained:
            ev["setup"] = True
        if site is None and kind == "write":
            site, at, callers = self._sites(outer=3)
            if callers:
                extra["callers"] = callers
        elif site is None and kind not in ("param", "buffer", "backward"):
            site, at = self._sites()
        if site:
            ev["site"] = site
        if at:
            ev["at"] = at
        if target is not None:
            if isinstance(target, str):
                ev["t"] = target
            else:
                ev["_ref"] = self._ref(target)
        if args:
            ev["args"] = args
        if out is not None:
            ev["out"] = out
        for key, value in extra.items():
            if value is not None:
                ev[key] = value
        self.events.append(ev)
        return ev

    def _ref(self, obj):
        torch = self.torch
        if isinstance(obj, torch.Tensor):
            try:
                ref = weakref.ref(obj)
            except TypeError:
                ref = None
            return ("tensor", ref, _ptr(obj), list(obj.shape))
        if isinstance(obj, torch.nn.Module):
            return ("module", weakref.ref(obj), None, type(obj).__name__)
        return ("other", None, None, type(obj).__name__)

    def _count(self, kind, limit):
        key = (self.obs.k, kind)
        n = self._per_step.get(key, 0)
        if n >= limit:
            self.dropped[kind] = self.dropped.get(kind, 0) + 1
            return False
        self._per_step[key] = n + 1
        return True

    def _sites(self, outer=0):
        """(user site, innermost frame outside torch and the standard library when it differs[, outer user frames])."""
        frame: Any = sys._getframe(2)
        at = None
        site = None
        callers: list = []
        base = sys.base_prefix + os.sep + "lib"
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(core.HERE):
                frame = frame.f_back
                continue
            torch_or_std = (os.sep + "torch" + os.sep) in filename or filename.startswith(("<", base))
            if site is None and at is None and not torch_or_std:
                at = self._fmt(frame)
            if not core._is_library(filename):
                if site is None:
                    site = self._fmt(frame)
                    if not outer:
                        break
                else:
                    callers.append(self._fmt(frame))
                    if len(callers) >= outer:
                        break
            frame = frame.f_back
        at = at if at != site else None
        if outer:
            return site, at, callers
        return site, at

    def _fmt(self, frame):
        code = frame.f_code
        path = self._site_cache.get(code.co_filename)
        if path is None:
            path = self._rel_path(code.co_filename)
            self._site_cache[code.co_filename] = path
        name = code.co_name
        if name.startswith("torch_dynamo_resume_in_"):  # a compiled frame resumed after a graph break
            name = name[len("torch_dynamo_resume_in_") :].rsplit("_at_", 1)[0]
        return f"{path}:{frame.f_lineno} in {name}"

    def _rel_path(self, filename):
        marker = os.sep + "site-packages" + os.sep
        if marker in filename:  # a library, wherever its environment is: by its import path
            return filename.split(marker, 1)[1]
        for prefix in self._prefixes:
            if filename.startswith(prefix):
                return filename[len(prefix) :]
        return filename

    def _rel(self, site):
        if not site:
            return site
        for prefix in self._prefixes:
            if site.startswith(prefix):
                return site[len(prefix) :]
        return site

    def _forked(self):
        """A forked child (a DataLoader worker) records nothing: every hook and the mode pass through."""
        self._ops_off = True
        self._pid = -1
        self._tid = -1

"""What the optimizer step did: parameter snapshots, the gradients the optimizer read, each parameter's
update against its norm and the first-order loss change. A mixin of `Recorder`. Torch only.
"""

import math
from typing import Any

import torch

try:  # imported as part of the trainsleuth package (live mode)
    from . import _ts_probe_tensors as tens
    from ._ts_probe_util import _f
except ImportError:  # imported from the runner's own folder (user's interpreter)
    import _ts_probe_tensors as tens  # type: ignore[no-redef]
    from _ts_probe_util import _f  # type: ignore[no-redef]


def _put(lst, i, value, keep=False):
    """lst[i] = value, padding with None; with keep, an existing entry stays."""
    while len(lst) <= i:
        lst.append(None)
    if not keep:
        lst[i] = value


class UpdatesMixin:
    """Snapshots, gradients read from `.grad` and update measurements; expects the `Recorder` attributes."""

    # set by Recorder.__init__ and its other parts
    _groups: Any
    history: Any
    index_offset: Any
    _lrs: Any
    measured_at: Any
    _measured_step: Any
    opt_group: Any
    opt_ids: Any
    optimizers: Any
    params: Any
    predict_change: Any
    predicted_changes: Any
    pstats: Any
    step: Any
    step_lrs: Any
    steps_done: Any
    updates_measured: Any
    _snap_pool: Any
    _snap_busy: Any

    def snapshot_params(self, only=None):
        """Detached copies of the trainable parameters (taken right before an optimizer step);
        with `only` (a set of parameter ids), of those only and None for the others."""
        if self.optimizers:
            self._lrs = [_f(g.get("lr")) for g in self._groups()]
        # buffers reused from step to step (a fresh clone of every parameter each step costs more than the
        # copy: the allocator hands back new pages to fault in); one in use by an unmeasured snapshot
        # (two optimizers over one parameter) is not shared
        pool, busy = self._snap_pool, self._snap_busy
        out = [None] * len(self.params)  # type: list
        dst, src = [], []
        with torch.no_grad():
            for i, (_, p) in enumerate(self.params):
                if not p.requires_grad or (only is not None and id(p) not in only):
                    continue
                t = p.detach()
                buf = pool.get(i)
                if (
                    i in busy
                    or buf is None
                    or buf.shape != t.shape
                    or buf.dtype != t.dtype
                    or buf.device != t.device
                ):
                    buf = t.clone()
                    if i not in busy:
                        pool[i] = buf
                else:
                    dst.append(buf)
                    src.append(t)
                busy.add(i)
                out[i] = buf
            if dst:
                try:
                    torch._foreach_copy_(dst, src)
                except Exception:  # builds without the fused copy
                    for d, t in zip(dst, src):  # noqa: B905
                        d.copy_(t)
        return out

    def _release(self, snapshot):
        """The snapshot's buffers may be reused by the next one (its measurement reads them right after)."""
        if snapshot is not None:
            self._snap_busy.difference_update(i for i, t in enumerate(snapshot) if t is not None)

    def release_snapshots(self):
        """Drop the reused snapshot buffers (when the recorder stops watching)."""
        self._snap_pool = {}
        self._snap_busy = set()

    def measure_updates(self, snapshot, accumulate=False):
        """Record this step's parameter updates against `snapshot`, while `.grad` still holds the
        gradients the optimizer used (call right after optimizer.step, e.g. from its post-hook).
        `accumulate`: a further optimizer of the same step (the step's first-order change adds up)."""
        self._release(snapshot)
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

    def _effective_lr(self, p):
        """The largest learning rate the parameter's group stepped with (a warmup starts at 0)."""
        gi = self.opt_group.get(id(p))
        used = [
            lrs[gi]
            for lrs in self.step_lrs
            if lrs and gi is not None and gi < len(lrs) and lrs[gi] is not None
        ]
        return max(used) if used else self.opt_ids.get(id(p))


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

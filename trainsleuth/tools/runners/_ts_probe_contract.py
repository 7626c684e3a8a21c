"""Loss and label contract checks: what the loss function is given, watched on the first probe step.

A `torch.overrides.TorchFunctionMode` sees every torch call of one training step (the model's forward,
the loss code, the backward call). It checks the calls that define the loss, before they run:

- `cross_entropy` / `nll_loss`: labels all equal to `ignore_index` (no learning signal), labels outside
  `[0, C)` (stopped before the kernel runs, so a clear finding instead of a device assert),
  probabilities given to a loss that expects logits, raw scores given to `nll_loss`, normalisation over
  the wrong axis, and the first loss against -log(1/C);
- elementwise losses and arithmetic in the loss code (outside the model's child modules): a prediction
  broadcast against a target from the batch into a larger matrix ((B, 1) against (B,) gives (B, B));
- `softmax` / `log_softmax` over the batch axis in the loss code.

Inside `__torch_function__` the mode is switched off, so the checks' own torch calls are not seen.
Torch only.
"""

import math
import os
import sys
from types import FrameType  # noqa: F401  (type comment)

import torch
from torch.overrides import TorchFunctionMode

try:
    from . import _ts_probe_tensors as tens
    from ._ts_probe_util import THRESHOLDS, _f, finding, short_list
except ImportError:  # the runner's own folder (user's interpreter)
    import _ts_probe_tensors as tens  # type: ignore[no-redef]
    from _ts_probe_util import THRESHOLDS, _f, finding, short_list  # type: ignore[no-redef]

CLASS_LOSSES = {"cross_entropy", "nll_loss"}
PAIR_LOSSES = {
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "soft_margin_loss",
    "poisson_nll_loss",
    "gaussian_nll_loss",
    "kl_div",
}
BINARY_OPS = {
    "sub",
    "rsub",
    "add",
    "mul",
    "div",
    "true_divide",
    "__sub__",
    "__rsub__",
    "__add__",
    "__radd__",
    "__mul__",
    "__rmul__",
    "__truediv__",
    "__rtruediv__",
    "__pow__",
    "pow",
}
NORMALIZERS = {"softmax", "log_softmax"}
TAINT_MAX_NUMEL = 1 << 22
NORM_TOL = 1e-3


class ContractViolation(Exception):
    """Raised before a loss kernel that would fail (labels out of range); carries the finding."""

    def __init__(self, record):
        super().__init__(record["message"])
        self.finding = record


def _arg(args, kwargs, index, name, default=None):
    if name in kwargs:
        return kwargs[name]
    if len(args) > index:
        return args[index]
    return default


def _shape(t):
    return list(t.shape)


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _user_site():
    """'file.py:line in function' of the innermost caller outside torch and the probe: the user's line."""
    frame = sys._getframe(1)  # type: FrameType | None
    while frame is not None:
        name = os.path.abspath(frame.f_code.co_filename)
        if not name.startswith((_TORCH_DIR, _HERE)) and not name.startswith("<"):
            return f"{os.path.basename(name)}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    return None


class LossWatch(TorchFunctionMode):
    """Watches one step's torch calls for loss/label contract problems (see module docstring)."""

    def __init__(self, rec, batch, step):
        super().__init__()
        self.rec = rec
        self.step = step
        self.findings = []
        self.active = True
        self.record_violations = False
        self._codes = set()
        self._ce_seen = False
        self._tainted = {}
        self._keep = []
        self.batch_size = None
        self._taint_all(batch)

    def _taint_all(self, batch):
        """Every tensor of `batch` (a nested structure) counts as data: a target the loss may be given."""
        for _, t in tens.leaf_paths(batch):
            if t.requires_grad:
                continue
            self._taint(t)
            if self.batch_size is None and t.dim() >= 1:
                self.batch_size = int(t.shape[0])

    # ------------------------------------------------------------------ bookkeeping

    def _taint(self, t):
        ptr = tens.storage_ptr(t)
        if ptr is not None and t.numel() <= TAINT_MAX_NUMEL:
            self._tainted[ptr] = True
            self._keep.append(t)

    def _from_batch(self, t):
        return isinstance(t, torch.Tensor) and not t.requires_grad and tens.storage_ptr(t) in self._tainted

    def _in_loss_region(self):
        """Outside the model, or in the root module's own code (HF models compute the loss there)."""
        return len(self.rec.open_modules()) <= 1

    def _add(self, code, severity, message, module, evidence):
        if code in self._codes:
            return
        self._codes.add(code)
        if module is not None:
            evidence = {**evidence, "params": self.rec.module_params(module)[:6]}
        self.findings.append(
            finding(code, severity, message, step=self.step, module=module, evidence=evidence)
        )

    # ------------------------------------------------------------------ dispatch

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.active:  # closed, but still on the mode stack until it can be popped
            return func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        try:
            if name in CLASS_LOSSES:
                self._check_class_loss(name, args, kwargs)
            elif name in PAIR_LOSSES:
                self._check_pair(name, _arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "target"))
            elif name in BINARY_OPS and len(args) >= 2 and self._in_loss_region():
                self._check_pair(name, args[0], args[1])
            elif name in NORMALIZERS and self._in_loss_region():
                self._check_normalizer(name, args, kwargs)
        except ContractViolation:
            raise
        except Exception as exc:  # a check must never break the user's step
            self.rec.internal(exc)
        out = func(*args, **kwargs)
        try:
            if name == "cross_entropy" and not self._ce_seen:
                self._ce_seen = True
                self._check_initial_loss(args, kwargs, out)
            if (
                isinstance(out, torch.Tensor)
                and not out.requires_grad
                and any(self._from_batch(a) for a in args if isinstance(a, torch.Tensor))
            ):
                self._taint(out)
        except Exception as exc:
            self.rec.internal(exc)
        return out

    # ------------------------------------------------------------------ checks

    def _check_class_loss(self, name, args, kwargs):
        x = _arg(args, kwargs, 0, "input")
        t = _arg(args, kwargs, 1, "target")
        if not isinstance(x, torch.Tensor) or not isinstance(t, torch.Tensor) or x.dim() == 0:
            return
        ignore = _arg(args, kwargs, 4, "ignore_index", -100)
        cdim = 1 if x.dim() >= 2 else 0
        classes = int(x.shape[cdim])
        module = self.rec.producer(x)
        where = f"{name}(input {tuple(x.shape)}, target {tuple(t.shape)})"
        if not t.is_floating_point():
            with torch.no_grad():
                valid = t != ignore
                n_valid = int(valid.sum())
                if n_valid == 0:
                    self._add(
                        "labels_all_ignored",
                        "error",
                        f"Every label given to {name} equals ignore_index ({ignore}): the loss has no "
                        "learning signal (NaN or 0) and no gradient reaches the model.",
                        module,
                        {"call": where, "ignore_index": ignore, "labels": int(t.numel())},
                    )
                    return
                vals = t[valid]
                lo, hi = int(vals.min()), int(vals.max())
            if lo < 0 or hi >= classes:
                n_bad = int(((vals < 0) | (vals >= classes)).sum())
                record = finding(
                    "label_out_of_range",
                    "error",
                    f"Labels given to {name} range over [{lo}, {hi}] but the prediction has {classes} "
                    f"classes (valid labels are 0..{classes - 1}): {n_bad} of {n_valid} labels are out of "
                    "range (on a GPU this is a device-side assert).",
                    step=self.step,
                    module=module,
                    evidence={
                        "call": where,
                        "min_label": lo,
                        "max_label": hi,
                        "num_classes": classes,
                        "out_of_range": n_bad,
                        "ignore_index": ignore,
                        "params": self.rec.module_params(module)[:6],
                        "hint": "labels numbered from 1, or num_labels smaller than the label set",
                    },
                )
                if self.record_violations:  # the user's own run (observer): the exception may end it
                    self.findings.append(record)
                raise ContractViolation(record)
        self._check_input_kind(name, x, cdim, module, where)

    def _check_input_kind(self, name, x, cdim, module, where):
        with torch.no_grad():
            xd = x.detach().float()
            if xd.numel() < 2 or xd.shape[cdim] < 2 or not bool(torch.isfinite(xd).all()):
                return
            nonneg = float(xd.min()) >= 0.0 and float(xd.max()) <= 1.0
            sums_c = float((xd.sum(cdim) - 1).abs().max()) if nonneg else None
            prob_c = sums_c is not None and sums_c < NORM_TOL
            lse_c = float(torch.logsumexp(xd, cdim).abs().max())
            nonpos = float(xd.max()) <= 1e-6
            other = [d for d in range(xd.dim()) if d != cdim and xd.shape[d] > 1]
            prob_other = [d for d in other if nonneg and float((xd.sum(d) - 1).abs().max()) < NORM_TOL]
            logp_other = [d for d in other if nonpos and float(torch.logsumexp(xd, d).abs().max()) < NORM_TOL]
        if name == "cross_entropy":
            if prob_c:
                self._add(
                    "loss_input_mismatch",
                    "error",
                    f"{where} receives probabilities (rows already sum to 1: softmax applied before the "
                    "loss); cross_entropy applies log_softmax itself and expects logits, so the gradient "
                    "is squashed and the model learns slowly or not at all.",
                    module,
                    {
                        "call": where,
                        "expects": "logits",
                        "got": "probabilities",
                        "max_row_sum_error": _f(sums_c),
                    },
                )
            elif prob_other:
                self._wrong_axis(name, where, module, cdim, prob_other[0], "probabilities")
            return
        # nll_loss expects log-probabilities along the class dimension
        if nonpos and lse_c < NORM_TOL:
            return
        if logp_other:
            self._wrong_axis(name, where, module, cdim, logp_other[0], "log-probabilities")
        elif prob_c:
            self._add(
                "loss_input_mismatch",
                "error",
                f"{where} receives probabilities (softmax output) but nll_loss expects log-probabilities: "
                "use log_softmax (or cross_entropy on the logits).",
                module,
                {"call": where, "expects": "log-probabilities", "got": "probabilities"},
            )
        else:
            self._add(
                "loss_input_mismatch",
                "error",
                f"{where} receives unnormalised scores (logsumexp over the classes is {lse_c:.3g}, not 0): "
                "nll_loss expects log-probabilities, so the loss is unbounded below; apply log_softmax "
                "or use cross_entropy.",
                module,
                {
                    "call": where,
                    "expects": "log-probabilities",
                    "got": "raw scores",
                    "max_abs_logsumexp": _f(lse_c),
                },
            )

    def _wrong_axis(self, name, where, module, cdim, dim, kind):
        self._add(
            "loss_wrong_axis",
            "error",
            f"{where} receives {kind} normalised over dim {dim} instead of the class dim {cdim}: softmax "
            f"was taken over the wrong axis (dim {dim}{' is the batch' if dim == 0 else ''}).",
            module,
            {"call": where, "normalised_dim": dim, "class_dim": cdim},
        )

    def _check_pair(self, name, a, b):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.shape == b.shape:
            return
        if a.requires_grad == b.requires_grad:
            return
        pred, target = (a, b) if a.requires_grad else (b, a)
        if not self._from_batch(target) or not pred.is_floating_point():
            return
        try:
            out_shape = torch.broadcast_shapes(a.shape, b.shape)
        except RuntimeError:
            return
        numel = math.prod(out_shape)
        if numel <= max(a.numel(), b.numel()):
            return  # one side is only expanded to the other's shape (a scalar weight, a mask)
        module = self.rec.producer(pred)
        op = name.strip("_")
        site = _user_site()
        self._add(
            "loss_broadcast",
            "error",
            f"The loss code's `{op}`{f' ({site})' if site else ''} broadcasts the prediction "
            f"{tuple(pred.shape)} (from module `{module}`) against the target {tuple(target.shape)} into a "
            f"{tuple(out_shape)} tensor: every prediction is compared with every target. Make the shapes "
            "equal (e.g. prediction.squeeze(-1) or target.view(-1, 1)).",
            module,
            {
                "operation": op,
                "where": site,
                "prediction_shape": _shape(pred),
                "target_shape": _shape(target),
                "result_shape": list(out_shape),
            },
        )

    def _check_normalizer(self, name, args, kwargs):
        x = _arg(args, kwargs, 0, "input")
        if not isinstance(x, torch.Tensor) or not x.requires_grad or x.dim() < 2:
            return
        dim = _arg(args, kwargs, 1, "dim")
        if dim is None:
            dim = 0 if x.dim() in (0, 1, 3) else 1
        dim = dim % x.dim()
        if dim != 0 or x.shape[0] == x.shape[-1] or x.shape[0] != self.batch_size:
            return
        module = self.rec.producer(x)
        self._add(
            "loss_wrong_axis",
            "error",
            f"The loss code's `{name}` over dim 0 of {tuple(x.shape)} normalises across the batch "
            f"({x.shape[0]} samples) instead of across the classes (dim -1).",
            module,
            {"operation": name, "input_shape": _shape(x), "dim": 0},
        )

    def _check_initial_loss(self, args, kwargs, out):
        if self.step != 0 or not isinstance(out, torch.Tensor) or out.numel() != 1:
            return
        x = _arg(args, kwargs, 0, "input")
        t = _arg(args, kwargs, 1, "target")
        if _arg(args, kwargs, 6, "reduction", "mean") != "mean" or t.is_floating_point():
            return
        classes = int(x.shape[1] if x.dim() >= 2 else x.shape[0])
        value = float(out.detach())
        if classes < 2 or not math.isfinite(value):
            return
        ref = math.log(classes)
        if value > THRESHOLDS["init_loss_ratio"] * ref and value - ref > THRESHOLDS["init_loss_excess"]:
            module = self.rec.producer(x)
            self._add(
                "initial_loss_off",
                "warning",
                f"The first cross-entropy is {value:.4g}, far above -log(1/C) = {ref:.4g} for C = {classes} "
                f"classes (what an untrained model predicting uniformly gets): the model starts confidently "
                f"wrong, usually an output layer initialised too large or logits scaled up.",
                module,
                {
                    "initial_loss": _f(value),
                    "reference": _f(ref),
                    "reference_is": f"-log(1/{classes}), the loss of uniform predictions",
                    "num_classes": classes,
                },
            )


def mode_findings(watch):
    return list(watch.findings) if watch is not None else []


__all__ = ["ContractViolation", "LossWatch", "mode_findings", "short_list"]

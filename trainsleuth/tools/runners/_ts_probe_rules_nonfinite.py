"""Probe rules: where NaN/Inf first appears (loss, forward, backward). Standard library only."""

import math

try:
    from ._ts_probe_util import _f, _num, display, finding
except ImportError:  # the runner's own folder (user's interpreter)
    from _ts_probe_util import _f, _num, display, finding  # type: ignore[no-redef]


def nonfinite_rules(stats, losses):
    out = []
    origin = stats.get("forward_origin")
    for i, loss in enumerate(losses):
        if loss is not None and not math.isfinite(loss):
            ev = {"loss": _f(loss), "losses": [_f(x) for x in losses[: i + 1]]}
            if origin is None and stats.get("model_output_finite", {}).get(str(i)) is True:
                ev["created_in"] = "loss function (the model's outputs were finite)"
                if stats.get("loss_op"):
                    ev["op"] = stats["loss_op"]
            made = f", made by `{ev['op']}`" if ev.get("op") else ""
            out.append(
                finding(
                    "nonfinite_loss",
                    "error",
                    f"The loss is {_f(loss)} at probe step {i}"
                    + (
                        f" and is created in the loss function{made}: the model's outputs were finite."
                        if "created_in" in ev
                        else "."
                    ),
                    step=i,
                    metric="loss",
                    evidence=ev,
                )
            )
            break
    if origin:
        mod = origin.get("module")
        if origin.get("kind") == "input":
            msg = "The batch itself contains NaN/Inf values before any module runs."
        elif origin.get("kind") == "parent_code":
            msg = (
                f"NaN/Inf first appears in the forward code of {display(mod)} itself (not in a child), between "
                f"{origin.get('last_finite_child') or 'its start'} and "
                f"{origin.get('first_nonfinite_input_child') or 'its output'}."
            )
        else:
            msg = f"NaN/Inf first appears in the forward pass at {display(mod)} ({origin.get('type')}): its inputs were finite, its output is not."
        if origin.get("op") and origin.get("kind") != "input":
            msg += f" The operation that made it: `{origin['op']}`."
        before = origin.get("nonfinite_params_before_step")
        if before:
            msg += (
                f" Its parameters {', '.join(before[:3])} were already non-finite during that forward pass."
            )
        elif before is not None:
            msg += " Its own parameters were finite during that forward pass."
        ev = {k: v for k, v in origin.items() if k not in ("module", "step")}
        out.append(
            finding(
                "nonfinite_forward", "error", msg, step=origin.get("step"), module=mod or None, evidence=ev
            )
        )
    borigin = stats.get("backward_origin")
    if borigin and not origin:
        mod = borigin.get("module")
        if borigin.get("kind") == "loss":
            msg = (
                "Forward and loss are finite but the backward pass of the loss function creates NaN/Inf "
                "gradients"
                + (f" (in the backward of `{borigin['op']}`)" if borigin.get("op") else "")
                + (f"; the first module they reach is {mod} ({borigin.get('type')})." if mod else ".")
            )
        else:
            msg = f"Forward and loss are finite but the backward pass creates NaN/Inf gradients, first at {display(mod)}."
        ev = {k: v for k, v in borigin.items() if k not in ("module", "step")}
        out.append(
            finding("nonfinite_gradient", "error", msg, step=borigin.get("step"), module=mod, evidence=ev)
        )
    return out


__all__ = ["_num", "nonfinite_rules"]

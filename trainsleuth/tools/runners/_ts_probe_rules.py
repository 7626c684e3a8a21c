"""Gradient-probe rules: statistics in, finding dicts out. Standard library only.

Shared by the standalone runner (user's interpreter), by live mode (`trainsleuth.probe.attach`)
and by the server (`read_probe_run` trends), so it must never import torch or trainsleuth.
One family of rules per module: `_ts_probe_rules_nonfinite` (NaN/Inf origins), `_ts_probe_rules_paths`
(gradients that do not arrive, stay or move the weights; train/eval mode; accumulation),
`_ts_probe_rules_scale` (exploding, vanishing, imbalance, learning rate), `_ts_probe_rules_loss`
(loss trend, loss terms), `_ts_probe_rules_activations` (dead/saturated units, inputs). The loss and
label contract findings are made while the step runs (`_ts_probe_contract`) and merged here.

Thresholds are deliberately conservative: a false alarm on a healthy model is as bad as a miss.
Every finding carries what it measured and the reference it compared with in `evidence`.
"""

import math
import statistics

try:
    from . import _ts_probe_regimes as regimes
    from . import _ts_probe_rules_activations as act_rules
    from . import _ts_probe_rules_loss as loss_rules
    from . import _ts_probe_rules_nonfinite as nf_rules
    from . import _ts_probe_rules_paths as path_rules
    from . import _ts_probe_rules_regimes as regime_rules
    from . import _ts_probe_rules_scale as scale_rules
    from ._ts_probe_util import MAX_LISTED, THRESHOLDS, _f, _finite, _num, display, finding, highest_modules
except ImportError:  # the runner's own folder (user's interpreter)
    import _ts_probe_regimes as regimes  # type: ignore[no-redef]
    import _ts_probe_rules_activations as act_rules  # type: ignore[no-redef]
    import _ts_probe_rules_loss as loss_rules  # type: ignore[no-redef]
    import _ts_probe_rules_nonfinite as nf_rules  # type: ignore[no-redef]
    import _ts_probe_rules_paths as path_rules  # type: ignore[no-redef]
    import _ts_probe_rules_regimes as regime_rules  # type: ignore[no-redef]
    import _ts_probe_rules_scale as scale_rules  # type: ignore[no-redef]
    from _ts_probe_util import (  # type: ignore[no-redef]
        MAX_LISTED,
        THRESHOLDS,
        _f,
        _finite,
        _num,
        display,
        finding,
        highest_modules,
    )

loss_trend = loss_rules.loss_trend
layer_grad_rms = scale_rules.layer_grad_rms
module_grad_rms = scale_rules.module_grad_rms
_display = display


def analyze(stats, notes=None):
    """All probe findings for one statistics record (see `_ts_probe_core.Recorder.summary`).

    `notes` (a list) receives plain sentences about what could not be judged and why.
    """
    notes = notes if notes is not None else []
    if stats.get("regime_obs") and "regimes" not in stats:
        stats["regimes"] = regimes.detect(stats)  # the regime every rule below is judged against
    out = list(stats.get("contract_findings") or [])
    losses = [_num(x) for x in stats.get("losses", [])]
    valid_steps = stats.get("valid_steps", len(losses))
    nonfinite = nf_rules.nonfinite_rules(stats, losses)
    ignored = {f["step"] for f in out if f["code"] == "labels_all_ignored"}
    if ignored:  # a loss over no labels is NaN (0/0): the same fact, not a second problem
        dropped = [f for f in nonfinite if f["step"] in ignored]
        nonfinite = [f for f in nonfinite if f["step"] not in ignored]
        if dropped:
            notes.append(
                "The NaN loss at probe step "
                + ", ".join(str(s) for s in sorted(ignored))
                + " is the mean over zero labels (see labels_all_ignored), not a separate numerical problem."
            )
    out += nonfinite
    params = stats.get("params", [])
    modules = stats.get("modules", [])
    trainable = [p for p in params if p.get("requires_grad")]
    grad_steps = max(0, int(valid_steps or 0))
    out += path_rules.grad_not_zeroed(trainable)
    out += path_rules.mode_rules(stats)
    out += regime_rules.regime_rules(stats)
    out += path_rules.accumulation_rules(stats)
    if grad_steps <= 0:
        out += act_rules.activation_rules(stats)
        return out

    rms = {p["name"]: (scale_rules.grad_rms(p, grad_steps) or 0.0) for p in trainable}
    positive = [v for v in rms.values() if v > 0]
    floor = (statistics.median(positive) * THRESHOLDS["grad_floor"]) if positive else 0.0
    top_rms = max(positive) if positive else 0.0
    out += path_rules.no_gradient(stats, trainable, grad_steps, modules, notes)
    out += path_rules.params_not_updated(stats, trainable, grad_steps, rms, floor, top_rms, modules)
    updates = scale_rules.update_rules(stats, grad_steps, losses)
    out += updates
    out += scale_rules.gradient_scale_rules(stats, grad_steps)
    out += loss_rules.component_rules(stats)
    out += loss_rules.trend_rules(stats, grad_steps, losses, updates, notes)
    out += act_rules.input_rules(stats)
    out += act_rules.activation_rules(stats)
    return regime_rules.discount(out, stats, notes)


__all__ = [
    "MAX_LISTED",
    "THRESHOLDS",
    "_display",
    "_f",
    "_finite",
    "_num",
    "analyze",
    "finding",
    "highest_modules",
    "layer_grad_rms",
    "loss_trend",
    "math",
    "module_grad_rms",
    "regimes",
]

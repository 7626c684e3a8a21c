"""Values that are wrong in themselves: NaN/Inf, and a metric frozen at one exact value."""

from __future__ import annotations

from trainsleuth.tools.findings import Finding
from trainsleuth.tools.logs.detect.common import as_step, finding, r6, timeline
from trainsleuth.tools.logs.series import Series


def detect_nonfinite(series: list[Series]) -> list[Finding]:
    out = []
    for s in series:
        if not s.nonfinite:
            continue
        if s.role in ("loss", "val_loss", "loss_component", "perplexity"):
            sev = "error"
        elif s.role in ("grad_norm", "lr", "accuracy", "val_accuracy", "reward", "kl", "entropy"):
            sev = "warning"
        else:
            sev = "info"
        out.append(
            finding(
                "nonfinite_metric",
                sev,
                f"{s.name} becomes non-finite ({s.nonfinite_examples[0][1] if s.nonfinite_examples else 'nan'}) "
                f"at step {as_step(s.nonfinite_first_step)}; {s.nonfinite} of {s.total} values are NaN/Inf.",
                step=s.nonfinite_first_step,
                metric=s.name,
                role=s.role,
                count=s.nonfinite,
                total=s.total,
                examples=[{"step": as_step(st), "value": v} for st, v in s.nonfinite_examples],
                step_source="record position" if s.step_from_position else None,
            )
        )
    return out


def detect_constant(s: Series) -> Finding | None:
    if s.role not in ("loss", "val_loss", "grad_norm", "kl", "loss_component") or s.width > 1:
        return None
    steps, vals, _ = timeline(s)
    n = len(vals)
    if n < 8:
        return None
    best_len, best_start, run_start = 1, 0, 0
    for i in range(1, n):
        if vals[i] != vals[i - 1]:
            run_start = i
        elif i - run_start + 1 > best_len:
            best_len, best_start = i - run_start + 1, run_start
    need = max(8, int(0.05 * n))
    if best_len < need:
        return None
    value, q = vals[best_start], s.resolution
    if q and abs(value) < 500 * q and any(0 < abs(v - value) <= 10 * q for v in vals):
        return None  # printed near its rounding (0.0012 at 4 decimals): repeats are the rounding's
    return finding(
        "constant_metric",
        "warning",
        f"{s.name} is exactly {r6(vals[best_start])} for {best_len} consecutive records (steps "
        f"{as_step(steps[best_start])}-{as_step(steps[best_start + best_len - 1])}): a frozen value.",
        step=steps[best_start],
        metric=s.name,
        value=r6(vals[best_start]),
        records=best_len,
        last_step=as_step(steps[best_start + best_len - 1]),
        role=s.role,
        resolution=q or None,
    )

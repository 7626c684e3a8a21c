"""Anomaly detectors over metric series, one rule family per module, and `detect_all`, which runs
them on a read log. Conservative by design: a healthy run (noisy, with warmup, schedule changes,
periodic evaluation, noisy RL rewards) yields no warning or error.

Robust statistics throughout: baselines are medians of trailing *accepted* points (points not
themselves anomalous), spread is the MAD scaled to a standard deviation, and every threshold
also has a relative floor so quantised or near-constant series do not trip on tiny changes.
"""

from __future__ import annotations

from trainsleuth.tools.findings import Finding
from trainsleuth.tools.logs.collect import Collector
from trainsleuth.tools.logs.detect.common import finding, step_spacing, timeline
from trainsleuth.tools.logs.detect.gradnorm import detect_grad_norm, grad_findings
from trainsleuth.tools.logs.detect.loss import detect_loss
from trainsleuth.tools.logs.detect.overfit import detect_overfitting
from trainsleuth.tools.logs.detect.precision import detect_loss_scale, detect_skipped, skip_intervals
from trainsleuth.tools.logs.detect.progress import is_r2, plateau, r2_at_mean, val_stall
from trainsleuth.tools.logs.detect.throughput import detect_throughput
from trainsleuth.tools.logs.detect.values import detect_constant, detect_nonfinite
from trainsleuth.tools.logs.errors import KIND_TEXT, ErrorScanner
from trainsleuth.tools.logs.series import Series

__all__ = ["detect_all"]


def detect_all(
    series: list[Series], errors: ErrorScanner, collector: Collector, judged: list[Series] | None = None
) -> list[Finding]:
    """Every detector over a read log. `judged`: the series the verdict is about (`infer`)."""
    by_role: dict[str, list[Series]] = {}
    for s in series:
        by_role.setdefault(s.role, []).append(s)
    events: list[Finding] = []
    events += detect_nonfinite(series)
    losses = list(by_role.get("loss", []))
    comps = by_role.get("loss_component", [])
    rl = bool(by_role.get("reward") or by_role.get("kl"))
    if not losses and judged and judged[0].role == "val_loss":
        losses = list(judged)  # no training loss: its trend is judged on the validation loss
    elif not losses and (len(comps) == 1 or (comps and not rl)):
        losses = comps  # RL losses beside rewards are noisy by nature: only a lone one is judged
    loss_spikes = []
    # In reinforcement learning the losses follow the returns (a PPO loss rises while the agent
    # starts to succeed): they are not judged for spikes, divergence or progress there.
    for s in [] if rl else losses:
        la = detect_loss(s)
        events += la.findings
        loss_spikes += la.spikes
    for s in by_role.get("grad_norm", []):
        spikes = detect_grad_norm(s)
        events += grad_findings(s, spikes, loss_spikes)
    for s in series:
        f = detect_constant(s)
        if f:
            events.append(f)
    trains = [s for s in losses if s.role != "val_loss"]
    for v in by_role.get("val_loss", []):
        if v not in losses:  # a validation loss that blows up or spikes (nanoGPT at lr 1: 4.3 -> 55)
            events += detect_loss(v, trend=False).findings
        if trains:
            vsteps, vvals, _ = timeline(v)
            f = detect_overfitting(v, trains[0]) or val_stall(v, trains[0]) or plateau(v, vsteps, vvals)
            if f:
                events.append(f)
    # A regressor's R^2 at the mean-predictor's 0 (one finding: the first R^2 series, training before validation).
    for s in sorted((s for s in series if is_r2(s.name)), key=lambda s: ("val" in s.name.lower(), s.name)):
        f = r2_at_mean(s)
        if f:
            events.append(f)
            break
    falls: list[float] = []
    for s in by_role.get("loss_scale", []):
        found, fl = detect_loss_scale(s)
        events += found
        falls += fl
    counters = by_role.get("skipped", []) + by_role.get("nan_iterations", [])
    scale_name = next((s.name for s in by_role.get("loss_scale", [])), None)
    skips = skip_intervals(counters, falls, errors.overflow_steps, scale_name)
    main = max(series, key=lambda s: s.total) if series else None  # the densest steps: the log's spacing
    if main is not None and skips.intervals:
        msteps = timeline(main)[0]
        f = detect_skipped(
            skips, step_spacing(msteps), msteps[0] if msteps else None, msteps[-1] if msteps else None
        )
        if f:
            events.append(f)
    batch_changes = any(
        len({round(v, 6) for v in s.timeline()[1]}) > 1 for s in by_role.get("batch_size", [])
    )
    for role in ("throughput", "step_time"):
        for s in by_role.get(role, []):
            f = detect_throughput(s, batch_changes)
            if f:
                events.append(f)
    for hit in errors.hits.values():
        sev = "error"
        text = KIND_TEXT.get(hit.kind, hit.kind)
        if hit.kind == "min_loss_scale":
            events.append(
                finding(
                    "loss_scale_collapse",
                    "error",
                    f"The log says the minimum loss scale was reached (line {hit.line_no}).",
                    step=hit.step,
                    evidence_line=hit.line_no,
                    text=hit.text,
                )
            )
        events.append(
            finding(
                "error_message",
                sev,
                f"The log holds a {text} at line {hit.line_no}"
                + (f" ({hit.count} such lines)" if hit.count > 1 else "")
                + f": {hit.exception or hit.text}"[:400],
                step=hit.step,
                kind=hit.kind,
                line=hit.line_no,
                last_line=hit.last_line_no if hit.count > 1 else None,
                count=hit.count,
                text=hit.text,
                exception=hit.exception,
                step_note="the last step logged before this line" if hit.step is not None else None,
            )
        )
    return events

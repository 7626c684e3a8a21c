"""Gradient-norm spikes, linked to the loss spikes they lead, and repeated norms (skipped steps)."""

from __future__ import annotations

import math

from trainsleuth.tools.findings import Finding
from trainsleuth.tools.logs.detect.common import (
    MAX_EVENTS_PER_SERIES,
    as_step,
    finding,
    r6,
    step_spacing,
    timeline,
)
from trainsleuth.tools.logs.detect.spikes import Spike, find_spikes
from trainsleuth.tools.logs.series import Series


def detect_grad_norm(s: Series) -> list[tuple[Spike, list[float], list[float]]]:
    if s.width > 1:
        steps, _, vals, _ = s.timeline(peaks=True)
    else:
        steps, vals, _ = timeline(s)
    return [(sp, steps, vals) for sp in find_spikes(vals, "grad_norm", steps, s.resolution)]


def grad_findings(
    s: Series,
    spikes: list[tuple[Spike, list[float], list[float]]],
    loss_spikes: list[tuple[Series, list[float], Spike]],
) -> list[Finding]:
    out = []
    for sp, steps, vals in spikes[:MAX_EVENTS_PER_SERIES]:
        onset_step = steps[sp.onset]
        end_step = steps[sp.end]
        spacing = step_spacing(steps)
        lead = None
        linked = None
        for ls, lsteps, lsp in loss_spikes:
            lstart = lsteps[lsp.onset]
            if onset_step <= lstart <= end_step + 3 * spacing and lstart - onset_step <= 50 * spacing:
                lead = lstart - onset_step
                linked = (ls.name, lstart)
                break
        ratio = vals[sp.peak] / sp.base if sp.base > 0 else math.inf
        sev = "warning" if linked or ratio >= 20 else "info"
        msg = (
            f"{s.name} jumps from about {r6(sp.base)} to {r6(vals[sp.peak])} ({r6(ratio)}x) at step "
            f"{as_step(steps[sp.peak])}, rising from step {as_step(onset_step)}"
        )
        if linked:
            unit = "step" if lead == 1 else "steps"
            msg += f"; it leads the {linked[0]} spike at step {as_step(linked[1])} by {as_step(lead)} {unit}."
        else:
            msg += "; no loss spike follows it." if sp.recovered is not None else "."
        out.append(
            finding(
                "grad_norm_spike",
                sev,
                msg,
                step=onset_step,
                metric=s.name,
                baseline=r6(sp.base),
                threshold=r6(sp.threshold),
                peak=r6(vals[sp.peak]),
                peak_step=as_step(steps[sp.peak]),
                onset_step=as_step(onset_step),
                ratio_to_baseline=r6(ratio),
                leads_loss_spike_by=as_step(lead),
                loss_spike_step=as_step(linked[1]) if linked else None,
                loss_metric=linked[0] if linked else None,
                recovered_step=as_step(steps[sp.recovered]) if sp.recovered is not None else None,
                step_source="record position" if s.step_from_position else None,
            )
        )
    return out

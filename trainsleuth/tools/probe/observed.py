"""The gradient probe on the user's own command: the observer's `probe` plugin, read into a report.

`probe_command("python train.py --config c.yaml", ...)` runs the command under the observer
(`tools/observe`, in a scratch copy of the workspace), watches iterations start..start+steps-1 of the
real loop with `runners/_ts_observe_probe.py` and stops the run. Each training process writes its own
section (findings judged in that process by the shared rules); the report is rank 0's, with what other
ranks found that rank 0 did not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainsleuth.tools.probe.report import ProbeError, ProbeReport, to_findings

DEFAULT_STEPS = 8
MAX_STEPS = 200
PLUGIN = "probe"


def probe_command(
    command: str | list[str],
    *,
    python: Path,
    workspace: Path,
    steps: int = DEFAULT_STEPS,
    start: int = 1,
    timeout_s: float = 600.0,
    memory_limit_mb: float | None = None,
    cancel_event: threading.Event | None = None,
    cwd: Path | None = None,
    on_start: Callable[[Path], None] | None = None,
) -> ProbeReport:
    """Observe `steps` optimizer steps of `command` from iteration `start`; ProbeError when nothing could be judged."""
    from trainsleuth.tools.observe import CommandError, ObserveError, require_training, run_observed

    if not 1 <= steps <= MAX_STEPS:
        raise ProbeError(
            "bad_steps", f"steps must be between 1 and {MAX_STEPS}, got {steps}", "pass fewer steps"
        )
    if start < 1:
        raise ProbeError("bad_steps", f"start counts optimizer steps from 1, got {start}", "pass start >= 1")
    try:
        run = run_observed(
            command,
            python=python,
            workspace=workspace,
            plugins=[PLUGIN],
            steps=steps,
            start=start,
            timeout_s=timeout_s,
            memory_limit_mb=memory_limit_mb,
            cancel_event=cancel_event,
            cwd=cwd,
            on_start=on_start,
        )
    except CommandError as exc:
        raise ProbeError(
            "bad_command", str(exc), "give the command you run, e.g. 'python train.py --config c.yaml'"
        ) from None
    try:
        trained = require_training(run)
    except ObserveError as exc:
        raise ProbeError(exc.kind, exc.message, exc.next_step, detail=exc.detail) from None
    sections = []
    for rep in trained:
        section = (rep.get("plugins") or {}).get(PLUGIN)
        error = (rep.get("plugin_errors") or {}).get(PLUGIN)
        if error or not isinstance(section, dict):
            raise ProbeError(
                "runner_failed",
                "the probe failed inside the training process"
                + (f" (rank {rep['identity'].get('rank')})" if len(trained) > 1 else ""),
                "report this with the detail; meanwhile use entrypoint= for this project",
                detail=error or run.process.output_tail(3000),
            )
        sections.append((rep, section))
    rep, section = sections[0]
    inputs = any(r.get("name") == "input_optimization" for r in section.get("regimes") or [])
    if (not section.get("steps") or not (section.get("models") or inputs)) and not section.get("findings"):
        # no model an optimizer trains was watched and no input is optimised: nothing was judged, which is
        # never "healthy"
        raise ProbeError(
            "not_judged",
            "; ".join(section.get("notes") or []) or "no observed step completed",
            "check that the command trains a model with an optimizer (and reaches the steps asked for)",
            detail=run.process.output_tail(3000),
        )
    raw = list(section.get("findings") or [])
    notes = list(section.get("notes") or [])
    if len(sections) > 1:
        raw += _other_ranks(sections)
        notes.insert(0, f"{len(sections)} training processes were observed; the figures are rank 0's.")
    observed = list(section.get("steps") or [])
    stopped = None
    if len(observed) < steps:
        stopped = f"the run ended after {len(observed)} of the {steps} observed step(s) asked for"
        if rep.get("exception"):
            raised = rep["exception"]
            stopped += f": it raised {raised.get('type')}: {str(raised.get('message'))[:300]}"
    elif rep.get("exception"):
        notes.append(f"The run raised {rep['exception'].get('type')} after the observed steps.")
    if run.workspace_changes:
        notes.append(
            "Files in the workspace changed during the run (written by code the observer cannot redirect): "
            + ", ".join(run.workspace_changes[:10])
        )
    return ProbeReport(
        entrypoint=None,
        command=run.command.text,
        interpreter=str(python),
        steps=len(observed),
        mode="observed",
        findings=to_findings(raw),
        losses=list(section.get("losses") or []),
        global_grad_norms=list(section.get("global_grad_norms") or []),
        table=list(section.get("table") or [])[:200],
        layer_grad_rms=[(str(n), float(v)) for n, v in section.get("layer_grad_rms") or []],
        environment={
            "python": rep["identity"].get("python"),
            "torch": rep["identity"].get("torch"),
            "launcher": run.command.launcher,
            "processes": len(run.reports),
            "run_dir": str(run.run_dir),
        },
        requested_steps=steps,
        stopped=stopped,
        notes=notes,
        observed_steps=observed,
        lrs=list(section.get("lrs") or []),
        losses_by_optimizer=section.get("losses_by_optimizer"),
        models=list(section.get("models") or []),
        optimizers=list(rep.get("optimizers") or []),
        params=list(section.get("params") or []),
        n_params=section.get("n_params"),
        state=section.get("state") or {},
        nonfinite=section.get("nonfinite"),
        regimes=[{k: str(v) for k, v in r.items()} for r in section.get("regimes") or []],
        regime=str(section.get("regime") or ""),
        fixed_batch=False,
        duration_s=rep.get("elapsed_s"),
    )


def _other_ranks(sections: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[dict[str, Any]]:
    """What other ranks found that rank 0 did not (same code and module), marked with their rank."""
    seen = {(f.get("code"), f.get("module")) for f in sections[0][1].get("findings") or []}
    out = []
    for rep, section in sections[1:]:
        rank = rep["identity"].get("rank")
        for f in section.get("findings") or []:
            key = (f.get("code"), f.get("module"))
            if key in seen:
                continue
            seen.add(key)
            out.append({**f, "message": f"(rank {rank}) {f.get('message')}"})
    return out


__all__ = ["DEFAULT_STEPS", "probe_command"]

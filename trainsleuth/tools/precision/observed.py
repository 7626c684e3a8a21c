"""`compare_precision command=...`: the user's own training command, its first forward replayed per precision.

The command runs under the observer with its `precision` plugin (`runners/_ts_observe_precision.py`):
at the first observed step the model that trains has its forward replayed on the inputs it received,
in fp32 and under bf16/fp16 autocast, with the run's random state and buffers restored so the run
itself is unchanged; then the observer stops the run. The per-module comparison and the report are
the entrypoint form's (`compare.build_report`).
"""

from __future__ import annotations

import threading
from pathlib import Path

from trainsleuth.tools.distributed.errors import AnalysisError
from trainsleuth.tools.precision.compare import DEFAULT_RTOL, DTYPES, PrecisionReport, build_report

PLUGIN = "precision"


def compare_command(
    command: str | list[str],
    *,
    python: Path,
    workspace: Path,
    dtypes: list[str] | None = None,
    rtol: dict[str, float] | None = None,
    start: int = 1,
    timeout_s: float = 300.0,
    cancel_event: threading.Event | None = None,
    cwd: Path | None = None,
) -> PrecisionReport:
    """Replay the forward of step `start` of `command` in fp32 and in each of `dtypes`; AnalysisError if it cannot."""
    from trainsleuth.tools.observe import CommandError, ObserveError, require_training, run_observed

    dtypes = dtypes or list(DTYPES)
    bad = [d for d in dtypes if d not in DTYPES]
    if bad:
        raise AnalysisError(f"unknown dtype(s) {bad}; use bf16 and/or fp16", "pass dtypes=['bf16', 'fp16']")
    try:
        run = run_observed(
            command,
            python=python,
            workspace=workspace,
            plugins=[PLUGIN],
            steps=1,
            start=start,
            options={PLUGIN: {"dtypes": dtypes}},
            timeout_s=timeout_s,
            cancel_event=cancel_event,
            cwd=cwd,
        )
    except CommandError as exc:
        raise AnalysisError(str(exc), "give the command you run, e.g. 'python train.py --bf16'") from None
    try:
        trained = require_training(run)
    except ObserveError as exc:
        raise AnalysisError(f"{exc.message}\n{(exc.detail or '')[-2000:]}", exc.next_step) from None
    rep = trained[0]
    section = (rep.get("plugins") or {}).get(PLUGIN)
    error = (rep.get("plugin_errors") or {}).get(PLUGIN)
    if error or not isinstance(section, dict) or not section.get("ok"):
        detail = error or (section or {}).get("error") or run.process.output_tail(2000)
        raise AnalysisError(
            f"the replay of the model's forward failed inside the training process: {str(detail)[-1500:]}",
            "use entrypoint= for this project (compare_precision entrypoint='file.py:make')",
        )
    report = build_report(section, "", {**DEFAULT_RTOL, **(rtol or {})})
    report.entrypoint = None
    report.notes = [n for n in report.notes if "GradScaler" not in n]  # about gradients: none were compared
    report.command = run.command.text
    report.interpreter = str(python)
    report.notes.insert(
        0,
        f"replayed the forward of {section.get('model')} ({section.get('model_type')}) at step {section.get('step')} "
        "on the inputs the run gave it, under no_grad: module outputs and inputs compared, not gradients; the "
        "run's random state and buffers were restored after each replay",
    )
    if section.get("run_autocast"):
        report.notes.append(f"the run itself computes this forward under {section['run_autocast']} autocast")
    if len(trained) > 1:
        report.notes.append(f"{len(trained)} training processes were observed; the figures are rank 0's")
    if run.workspace_changes:
        report.notes.append(
            "files in the workspace changed during the run (written by code the observer cannot redirect): "
            + ", ".join(run.workspace_changes[:10])
        )
    return report

"""`compare_precision command=...`: the model's real first training forward, in fp32 and in bf16/fp16.

The user's command runs under the observer with its `precision` plugin
(`runners/_ts_observe_precision.py`): at the first training call of each model in the first observed
iteration, the plugin replays that forward on the same inputs in fp32 and under autocast, module by
module, without changing the run; the run stops after that iteration. The comparison and the report
are the entrypoint form's (`compare.build_report`): `precision_mismatch` at the first module beyond
tolerance, `lost_between_modules` when the precision is lost in forward code between modules.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainsleuth.tools.distributed.errors import AnalysisError
from trainsleuth.tools.observe import CommandError, ObserveError, require_training, run_observed
from trainsleuth.tools.precision.compare import DEFAULT_RTOL, DTYPES, PrecisionReport, build_report


def compare_command(
    command: str | list[str],
    *,
    python: Path,
    workspace: Path,
    dtypes: list[str] | None = None,
    rtol: dict[str, float] | None = None,
    start: int = 1,
    timeout_s: float = 180.0,
    cancel_event: threading.Event | None = None,
    on_start: Callable[[Path], None] | None = None,
) -> PrecisionReport:
    """Run `command` to the end of iteration `start`; compare its models' first training forward."""
    dtypes = dtypes or list(DTYPES)
    tolerances = {**DEFAULT_RTOL, **(rtol or {})}
    try:
        run = run_observed(
            command,
            python=python,
            workspace=workspace,
            plugins=["precision"],
            steps=1,
            start=start,
            options={"precision": {"dtypes": dtypes}},
            timeout_s=timeout_s,
            cancel_event=cancel_event,
            on_start=on_start,
        )
    except CommandError as exc:
        raise AnalysisError(
            f"compare_precision: {exc}", "give the command you run, e.g. 'python train.py'"
        ) from None
    try:
        trained = require_training(run)
    except ObserveError as exc:
        detail = f"\n{exc.detail[-1500:]}" if exc.detail else ""
        raise AnalysisError(f"compare_precision: {exc.message}{detail}", exc.next_step) from None
    report_of = trained[0]  # the lowest rank: every rank replays the same model
    section = (report_of.get("plugins") or {}).get("precision") or {}
    replays = [
        r for r in section.get("replays") or [] if r.get("results") or r.get("unsupported") or r.get("error")
    ]
    errors = (report_of.get("plugin_errors") or {}).get("precision")
    if not replays:
        raise AnalysisError(
            "compare_precision: no model was called with gradients in the observed iteration, so there was no "
            "training forward to replay" + (f" (the plugin failed: {errors[-600:]})" if errors else ""),
            "give the command that trains (the forward must run with gradients enabled), or a later start",
        )
    failed = [r for r in replays if r.get("error") and not r.get("results")]
    if len(failed) == len(replays):
        raise AnalysisError(
            f"compare_precision: replaying the forward of {failed[0]['label']} failed: {failed[0]['error']}",
            "use the entrypoint form (entrypoint='file.py:fn') for this model",
        )
    usable = [r for r in replays if r.get("results") or r.get("unsupported")]
    payload = _payload(usable)
    report = build_report(payload, "", tolerances)
    report.command = run.command.text
    report.interpreter = str(python)
    tree = f"{run.mirror.tree}/"
    for r in usable:
        r["called_at"] = str(r.get("called_at") or "").replace(tree, "") or None
        wrapper = f" inside {r['wrapper']}" if r.get("wrapper") else ""
        report.notes.append(
            f"replayed the forward of {r['label']} ({r['type']}{wrapper}) on the inputs of its first training call "
            f"(iteration {r['step']}, {r.get('called_at') or 'call site unknown'}), under no_grad, with the random "
            "generators, buffers and attributes restored: the training run itself was not changed"
        )
    for r in failed:
        report.notes.append(f"the replay of {r['label']} failed: {r['error'][:300]}")
    report.notes.append(
        "the command form compares module outputs and inputs of the real forward; gradients and the loss are "
        "compared by the entrypoint form (entrypoint='file.py:fn')"
    )
    return report


def _payload(replays: list[dict[str, Any]]) -> dict[str, Any]:
    """The entrypoint form's payload; module names carry the model's label when several models were replayed."""
    results: dict[str, Any] = {}
    unsupported: dict[str, str] = {}
    several = len(replays) > 1
    for r in replays:
        unsupported.update(r.get("unsupported") or {})
        for dtype, res in (r.get("results") or {}).items():
            merged = results.setdefault(
                dtype, {"loss_fp32": None, "loss_low": None, "loss_rel_error": None, "modules": []}
            )
            for row in res.get("modules") or []:
                name = row["module"]
                if several:
                    name = r["label"] if name == "<model>" else f"{r['label']}.{name}"
                merged["modules"].append({**row, "module": name})
    return {"device": replays[0].get("device", ""), "results": results, "unsupported": unsupported}

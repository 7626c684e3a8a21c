"""`compare_precision`: one step in fp32 and under bf16/fp16 autocast, compared module by module.

The runner (`runners/precision_runner.py`, in the user's interpreter) records every module's
output and every parameter's gradient in each precision; this module applies the tolerances and
reports `precision_mismatch` at the first module (in execution order for outputs, in backward
order for gradients) whose relative error exceeds them.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from trainsleuth.knowledge.links import failure_modes_for
from trainsleuth.tools.distributed.errors import AnalysisError, from_runner_error
from trainsleuth.tools.findings import Finding, is_healthy
from trainsleuth.tools.runners.launch import RunnerError, run_runner

# Relative error (‖low − fp32‖ / ‖fp32‖) allowed per module. bf16 keeps 8 significant bits
# (unit roundoff 2^-8 ≈ 0.4%), fp16 11 bits (≈ 0.05%); healthy layers stay well inside these.
DEFAULT_RTOL = {"bf16": 0.05, "fp16": 0.01}
DTYPES = ("bf16", "fp16")


class ModuleError(BaseModel):
    module: str
    type: str | None = None
    input_rel_error: float | str | None = None
    output_rel_error: float | str | None = None
    output_max_abs_error: float | str | None = None
    grad_rel_error: float | str | None = None
    grad_max_abs_error: float | str | None = None
    beyond_tolerance: bool = False


class PrecisionResult(BaseModel):
    dtype: str
    rtol: float
    loss_fp32: float | str | None = None
    loss_low: float | str | None = None
    loss_rel_error: float | str | None = None
    first_output_beyond: str | None = None
    first_grad_beyond: str | None = None
    modules: list[ModuleError] = Field(default_factory=list)


class PrecisionReport(BaseModel):
    entrypoint: str
    command: str | None = Field(default=None, description="the user's own command, when it was observed")
    healthy: bool
    device: str = ""
    results: list[PrecisionResult] = Field(default_factory=list)
    unsupported: dict[str, str] = Field(
        default_factory=dict, description="dtype -> why autocast with it is not available here"
    )
    findings: list[Finding] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    interpreter: str = ""

    def render_text(self) -> str:
        lines = [
            f"compare_precision {self.command or self.entrypoint} on {self.device}: "
            f"{'HEALTHY' if self.healthy else 'PROBLEMS FOUND'}"
        ]
        for r in self.results:
            loss = (
                f"loss {r.loss_fp32} -> {r.loss_low} (rel {_fmt(r.loss_rel_error)}); "
                if r.loss_fp32 is not None
                else ""
            )
            lines.append(
                f"{r.dtype} (rtol {r.rtol:g}): {loss}first output beyond: {r.first_output_beyond or '-'}; first "
                f"gradient beyond: {r.first_grad_beyond or '-'}"
            )
            for m in r.modules[:25]:
                mark = " <-- beyond tolerance" if m.beyond_tolerance else ""
                grad = f", grad rel {_fmt(m.grad_rel_error)}" if m.grad_rel_error is not None else ""
                lines.append(f"  {m.module} ({m.type}): output rel {_fmt(m.output_rel_error)}{grad}{mark}")
        for dtype, why in self.unsupported.items():
            lines.append(f"{dtype}: not compared: {why}")
        lines.extend(f.one_line() for f in self.findings)
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


def _fmt(x: Any) -> str:
    return f"{x:.3g}" if isinstance(x, float) else str(x)


def _num(x: Any) -> float | None:
    if x is None:
        return None
    if isinstance(x, str):
        return math.inf if x in ("nan", "inf", "-inf") else None
    return float(x)


def _prev_rel(row: dict[str, Any]) -> float:
    return _num(row.get("output_rel_error")) or 0.0


def _common_ancestor(a: str, b: str) -> str:
    """The innermost module whose forward calls both `a` and `b` ("<model>" for the root)."""
    shared: list[str] = []
    for x, y in zip(a.split(".")[:-1], b.split(".")[:-1], strict=False):
        if x != y:
            break
        shared.append(x)
    return ".".join(shared) or "<model>"


def _where_lost(
    row: dict[str, Any], prev: dict[str, Any] | None, rows: list[dict[str, Any]]
) -> dict[str, Any]:
    """For precision lost between modules: the forward the lost op is in (the innermost module calling
    both the last close module and the first far one), and the cancellation measured (the input far
    smaller in norm than the output before it: large low-precision values subtracted)."""
    if prev is None:
        return {}
    parent = _common_ancestor(prev["module"], row["module"])
    kind = next((r.get("type") for r in rows if r.get("module") == parent), None)
    prev_norm, in_norm = _num(prev.get("output_norm_fp32")), _num(row.get("input_norm_fp32"))
    shrink = prev_norm / in_norm if prev_norm and in_norm and math.isfinite(prev_norm) else None
    return {
        "arises_in": parent,
        "where": f"{kind}.forward (`{parent}`)" if kind else f"the forward of `{parent}`",
        "input_norm_fp32": row.get("input_norm_fp32"),
        "previous_output_norm_fp32": prev.get("output_norm_fp32"),
        "cancellation": shrink is not None and shrink >= 10,
        "shrink": shrink,
    }


def build_report(payload: dict[str, Any], entrypoint: str, rtol: dict[str, float]) -> PrecisionReport:
    report = PrecisionReport(
        entrypoint=entrypoint,
        healthy=True,
        device=str(payload.get("device", "")),
        unsupported=dict(payload.get("unsupported") or {}),
    )
    findings: list[Finding] = []
    for dtype, res in (payload.get("results") or {}).items():
        tol = rtol.get(dtype, DEFAULT_RTOL.get(dtype, 0.05))
        result = PrecisionResult(
            dtype=dtype,
            rtol=tol,
            loss_fp32=res.get("loss_fp32"),
            loss_low=res.get("loss_low"),
            loss_rel_error=res.get("loss_rel_error"),
        )
        prev_output: dict[str, Any] | None = None
        first_out: tuple[dict[str, Any], dict[str, Any] | None] | None = None
        for row in res.get("modules") or []:
            out_rel = _num(row.get("output_rel_error"))
            grad_rel = _num(row.get("grad_rel_error"))
            beyond_out = out_rel is not None and out_rel > tol
            beyond_grad = grad_rel is not None and grad_rel > tol
            result.modules.append(
                ModuleError(
                    module=row["module"],
                    type=row.get("type"),
                    input_rel_error=row.get("input_rel_error"),
                    output_rel_error=row.get("output_rel_error"),
                    output_max_abs_error=row.get("output_max_abs_error"),
                    grad_rel_error=row.get("grad_rel_error"),
                    grad_max_abs_error=row.get("grad_max_abs_error"),
                    beyond_tolerance=beyond_out or beyond_grad,
                )
            )
            if beyond_out and first_out is None:
                first_out = (row, prev_output)
            if out_rel is not None:
                prev_output = row
        # Gradients flow backwards: the first beyond tolerance in backward order is where it starts.
        first_grad = None
        for row in reversed(res.get("modules") or []):
            grad_rel = _num(row.get("grad_rel_error"))
            if grad_rel is not None and grad_rel > tol:
                first_grad = row
                break
        result.first_output_beyond = first_out[0]["module"] if first_out else None
        result.first_grad_beyond = first_grad["module"] if first_grad else None
        report.results.append(result)
        loss_rel = _num(res.get("loss_rel_error"))
        common_evidence = {
            "dtype": dtype,
            "rtol": tol,
            "loss_fp32": res.get("loss_fp32"),
            "loss_low": res.get("loss_low"),
            "loss_rel_error": res.get("loss_rel_error"),
        }
        if first_out is not None:
            row, prev = first_out
            rel = _num(row.get("output_rel_error")) or 0.0
            in_rel = _num(row.get("input_rel_error"))
            between = in_rel is not None and in_rel > tol and (prev is None or in_rel > 10 * _prev_rel(prev))
            lost = _where_lost(row, prev, res.get("modules") or []) if between else {}
            if between:
                # Every module before it computed closely; the input it was handed did not: the loss
                # happened in forward code that is no module (the module itself only inherits it).
                message = (
                    f"under {dtype} autocast the INPUT of {row['module']} ({row.get('type')}) already departs from "
                    f"fp32 by relative {_fmt(row.get('input_rel_error'))} (tolerance {tol:g})"
                    + (
                        f" while the output of {prev['module']} before it was within {_fmt(prev.get('output_rel_error'))}"
                        if prev is not None
                        else ""
                    )
                    + f": the precision is lost in your forward code between modules, before {row['module']}"
                    + (f", in {lost['where']}" if lost else "")
                    + " (an op that is no module, typically the difference of two large, nearly equal low-precision "
                    f"values: catastrophic cancellation), not in {row['module']}"
                    + (
                        f"; measured: that input is {lost['shrink']:.0f} times smaller in norm than "
                        f"{prev['module']}'s output ({_fmt(lost['input_norm_fp32'])} against "
                        f"{_fmt(lost['previous_output_norm_fp32'])}), so large values cancel"
                        if lost.get("cancellation") and prev is not None
                        else ""
                    )
                    + "; compute that step in fp32 (autocast(enabled=False) around it, with .float() inputs), "
                    "or subtract before the low-precision op"
                )
            else:
                message = (
                    f"under {dtype} autocast the output of {row['module']} ({row.get('type')}) departs from "
                    f"fp32 by relative {_fmt(row.get('output_rel_error'))} (tolerance {tol:g})"
                    + (
                        f" while its predecessor {prev['module']} was within {_fmt(prev.get('output_rel_error'))}"
                        if prev is not None
                        else ""
                    )
                    + "; keep this op in fp32 (autocast(enabled=False) around it, or upcast its input)"
                )
            findings.append(
                Finding(
                    code="precision_mismatch",
                    severity="error" if rel > 10 * tol or row.get("nonfinite_low") else "warning",
                    message=message,
                    module=row["module"],
                    evidence={
                        **common_evidence,
                        "output_rel_error": row.get("output_rel_error"),
                        "output_max_abs_error": row.get("output_max_abs_error"),
                        "output_norm_fp32": row.get("output_norm_fp32"),
                        "nonfinite_in_low_precision": row.get("nonfinite_low"),
                        "input_rel_error": row.get("input_rel_error"),
                        "lost_between_modules": between,
                        **{k: v for k, v in lost.items() if k not in ("where", "shrink")},
                        "previous_module": prev["module"] if prev else None,
                        "previous_output_rel_error": prev.get("output_rel_error") if prev else None,
                    },
                    failure_modes=failure_modes_for("precision_mismatch"),
                )
            )
        elif first_grad is not None:
            rel = _num(first_grad.get("grad_rel_error")) or 0.0
            findings.append(
                Finding(
                    code="precision_mismatch",
                    severity="error" if rel > 10 * tol or first_grad.get("grad_nonfinite_low") else "warning",
                    message=(
                        f"under {dtype} autocast the forward stays within tolerance but the gradients of "
                        f"{first_grad['module']} depart from fp32 by relative {_fmt(first_grad.get('grad_rel_error'))} "
                        f"(tolerance {tol:g})"
                        + ("; fp16 gradients underflow without a GradScaler" if dtype == "fp16" else "")
                    ),
                    module=first_grad["module"],
                    evidence={
                        **common_evidence,
                        "grad_rel_error": first_grad.get("grad_rel_error"),
                        "grad_max_abs_error": first_grad.get("grad_max_abs_error"),
                        "grad_norm_fp32": first_grad.get("grad_norm_fp32"),
                        "nonfinite_in_low_precision": first_grad.get("grad_nonfinite_low"),
                    },
                    failure_modes=failure_modes_for("precision_mismatch"),
                )
            )
        elif loss_rel is not None and loss_rel > tol:
            findings.append(
                Finding(
                    code="precision_mismatch",
                    severity="warning",
                    message=(
                        f"under {dtype} autocast the loss departs from fp32 by relative {_fmt(res.get('loss_rel_error'))} "
                        f"(tolerance {tol:g}) although no module output does: look at the loss computation"
                    ),
                    metric="loss",
                    evidence=common_evidence,
                    failure_modes=failure_modes_for("precision_mismatch"),
                )
            )
    for dtype, why in report.unsupported.items():
        report.notes.append(f"{dtype} autocast is not supported here ({why}); it was not compared")
    if payload.get("used_step_fn"):
        report.notes.append(
            "the entrypoint's step_fn ran under autocast (its own backward); weights and optimizer state were "
            "restored between runs"
        )
    if "fp16" in (payload.get("results") or {}):
        report.notes.append("fp16 ran without loss scaling (GradScaler), as a plain autocast step does")
    report.findings = findings
    report.healthy = is_healthy(findings)
    return report


def compare_precision(
    entrypoint: str,
    *,
    python: Path,
    cwd: Path,
    dtypes: list[str] | None = None,
    rtol: dict[str, float] | None = None,
    device: str = "auto",
    timeout_s: float = 180.0,
    cancel_event: threading.Event | None = None,
) -> PrecisionReport:
    dtypes = dtypes or list(DTYPES)
    bad = [d for d in dtypes if d not in DTYPES]
    if bad:
        raise AnalysisError(f"unknown dtype(s) {bad}; use bf16 and/or fp16", "pass dtypes=['bf16', 'fp16']")
    tolerances = {**DEFAULT_RTOL, **(rtol or {})}
    try:
        outcome = run_runner(
            "precision_runner.py",
            ["--entrypoint", entrypoint, "--dtypes", ",".join(dtypes), "--device", device],
            python=python,
            cwd=cwd,
            timeout_s=timeout_s,
            cancel_event=cancel_event,
        )
    except RunnerError as exc:
        raise from_runner_error(exc, "compare_precision") from None
    report = build_report(outcome.payload, entrypoint, tolerances)
    report.interpreter = str(python)
    return report

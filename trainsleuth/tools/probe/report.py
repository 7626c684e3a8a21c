"""Run the probe runner in the user's interpreter and build the report (findings, table, plot data)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from trainsleuth.knowledge.links import failure_modes_for
from trainsleuth.tools.findings import Finding
from trainsleuth.tools.runners.launch import RunnerError, run_runner

DEFAULT_STEPS = 8
MAX_STEPS = 200
TABLE_LIMIT = 200


class ProbeError(Exception):
    """The probe could not produce a report; `kind` is machine-readable, `next_step` says what to do."""

    def __init__(
        self, kind: str, message: str, next_step: str, *, key: str | None = None, detail: str | None = None
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.next_step = next_step
        self.key = key
        self.detail = detail


class ProbeReport(BaseModel):
    entrypoint: str | None = None
    command: str | None = None
    interpreter: str
    steps: int
    mode: str
    findings: list[Finding] = Field(default_factory=list)
    losses: list[float | str | None] = Field(default_factory=list)
    global_grad_norms: list[float | str | None] = Field(default_factory=list)
    table: list[dict[str, Any]] = Field(default_factory=list)
    layer_grad_rms: list[tuple[str, float]] = Field(default_factory=list)
    environment: dict[str, Any] = Field(default_factory=dict)
    unknown_keys: list[str] = Field(default_factory=list)
    duration_s: float | None = None
    requested_steps: int | None = None
    stopped: str | None = None
    notes: list[str] = Field(default_factory=list)
    # the user's own command (mode "observed"): the run's real steps, not one fixed batch
    fixed_batch: bool = True
    observed_steps: list[int] = Field(default_factory=list)
    lrs: list[Any] = Field(default_factory=list)
    losses_by_optimizer: dict[str, list[float | str | None]] | None = None
    models: list[dict[str, Any]] = Field(default_factory=list)
    optimizers: list[dict[str, Any]] = Field(default_factory=list)
    params: list[dict[str, Any]] = Field(default_factory=list)
    n_params: int | None = None
    state: dict[str, Any] = Field(default_factory=dict)
    nonfinite: dict[str, Any] | None = None
    regimes: list[dict[str, str]] = Field(default_factory=list)  # name, because, effects
    regime: str = ""  # one sentence: the regime assumed and what it changed

    @property
    def healthy(self) -> bool:
        return all(f.severity == "info" for f in self.findings)

    @property
    def target(self) -> str:
        """What was probed, as the user gave it."""
        return self.command or self.entrypoint or "?"


def to_findings(raw: list[dict[str, Any]]) -> list[Finding]:
    out = []
    for r in raw:
        out.append(
            Finding(
                code=r["code"],
                severity=r["severity"],
                message=r["message"],
                step=r.get("step"),
                module=r.get("module"),
                metric=r.get("metric"),
                evidence=r.get("evidence") or {},
                failure_modes=list(r.get("failure_modes") or failure_modes_for(r["code"])),
            )
        )
    rank = {"error": 0, "warning": 1, "info": 2}
    out.sort(key=lambda f: rank[f.severity])
    return out


NEXT_STEPS = {
    "bad_entrypoint": "pass ENTRYPOINT as path/to/file.py:function or package.module:function",
    "entrypoint_not_found": "check the path (relative to the workspace) or the module name",
    "function_not_found": "check the function name after the ':'",
    "import_error": "fix the error in the user's module (traceback in the detail), then probe again",
    "entrypoint_raised": "fix the error raised by the entrypoint function (traceback in the detail)",
    "contract_error": "return a mapping as described in the probe://entrypoint resource: model, batch/batches, and optionally loss_fn, optimizer, scheduler, step_fn, eval_fn",
    "script_entrypoint": "give the command you run: `trainsleuth probe -- python SCRIPT ...` (MCP: probe_gradients with command='python SCRIPT ...'), or scaffold an entrypoint: `trainsleuth probe --scaffold SCRIPT`",
    "step_raised": "the user's training code raised during the probe step; fix it (traceback in the detail)",
    "timeout": "probe fewer steps, use a smaller batch, or raise the timeout",
    "out_of_memory": "use a smaller batch or model in the entrypoint, or raise the memory limit",
    "cancelled": "run the probe again when needed",
    "scaffold_incomplete": "set LOSS_FN = loss_fn in the scaffold file and write loss_fn from the lines shown, then probe it again",
    "bad_scaffold": "pass the training script (a .py file with the training loop)",
    "no_torch": "install torch in that interpreter, or pass the interpreter of the project's environment (--python)",
    "interpreter_failed": "pass a working Python interpreter (--python)",
}


def run_probe(
    entrypoint: str,
    *,
    python: Path,
    cwd: Path,
    steps: int = DEFAULT_STEPS,
    timeout_s: float = 300.0,
    memory_limit_mb: float | None = None,
    cancel_event: threading.Event | None = None,
) -> ProbeReport:
    """Probe `entrypoint` for `steps` steps in interpreter `python`; raise ProbeError on bad input."""
    if entrypoint and ":" not in entrypoint and entrypoint.endswith(".py"):
        raise ProbeError(
            "script_entrypoint",
            f"{entrypoint} is a file, not an entrypoint: an entrypoint names a function "
            "(path/to/file.py:function) that returns {'model': ..., 'batch': ...}. To probe a training "
            "script as it is, give the command you run (or scaffold an entrypoint from it)",
            NEXT_STEPS["script_entrypoint"].replace("SCRIPT", entrypoint),
        )
    if not entrypoint or ":" not in entrypoint:
        raise ProbeError(
            "bad_entrypoint",
            f"entrypoint {entrypoint!r} must look like path/to/file.py:function or package.module:function",
            NEXT_STEPS["bad_entrypoint"],
        )
    if not 1 <= steps <= MAX_STEPS:
        raise ProbeError(
            "bad_steps", f"steps must be between 1 and {MAX_STEPS}, got {steps}", "pass a smaller --steps"
        )
    try:
        outcome = run_runner(
            "probe_runner.py",
            ["--entrypoint", entrypoint, "--steps", str(steps), "--cwd", str(cwd)],
            python=python,
            cwd=cwd,
            timeout_s=timeout_s,
            memory_limit_mb=memory_limit_mb,
            cancel_event=cancel_event,
        )
    except RunnerError as exc:
        message = exc.message
        if exc.kind == "no_torch" and str(python) not in message:
            message = f"{message} (interpreter: {python})"
        if exc.kind == "script_entrypoint":
            message = message.replace("SCRIPT", entrypoint.rpartition(":")[0])
        if exc.kind == "contract_error" and exc.key:
            message = f"{message} [contract key: {exc.key!r}]"
        if exc.kind == "interpreter_failed" or (
            exc.kind == "runner_failed" and exc.detail and "SyntaxError" in exc.detail
        ):
            message = f"{message} (interpreter: {python})"
        raise ProbeError(
            exc.kind,
            message,
            NEXT_STEPS.get(exc.kind, "check the detail and the entrypoint"),
            key=exc.key,
            detail=exc.detail,
        ) from exc
    payload = outcome.payload
    stats = payload.get("stats", {})
    return ProbeReport(
        entrypoint=entrypoint,
        interpreter=str(python),
        steps=int(stats.get("steps", 0)),
        mode=str(stats.get("mode", "")),
        findings=to_findings(payload.get("findings", [])),
        losses=stats.get("losses", []),
        global_grad_norms=stats.get("global_grad_norms", []),
        table=payload.get("table", [])[:TABLE_LIMIT],
        layer_grad_rms=[(str(n), float(v)) for n, v in payload.get("layer_grad_rms", [])],
        environment=payload.get("environment", {}),
        unknown_keys=payload.get("unknown_keys", []),
        duration_s=payload.get("duration_s"),
        requested_steps=steps,
        stopped=payload.get("stopped"),
        notes=list(payload.get("notes") or []),
        regimes=[{k: str(v) for k, v in r.items()} for r in payload.get("regimes") or []],
        regime=str(payload.get("regime") or ""),
    )


# evidence keys worth a line of their own in the text rendering (what to do, where it started)
EVIDENCE_LINES = (
    ("hint", "fix"),
    ("created_in", "created in"),
    ("cause", "cause"),
    ("nonfinite_params_before_step", "non-finite parameters during the forward pass"),
    ("nonfinite_params_after_step", "non-finite parameters after the optimizer step"),
    ("nonfinite_param_grads", "non-finite gradients in"),
    ("entered_from", "entered from"),
    ("call", "call"),
    ("reference", "compared with"),
    ("params", "parameters"),
)


def finding_lines(f: Finding) -> list[str]:
    """One finding as text: its line, then the evidence a reader acts on, then its failure modes."""
    lines = ["  " + f.one_line()]
    for key, label in EVIDENCE_LINES:
        value = f.evidence.get(key)
        if value in (None, [], ""):
            continue
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value[:6]) + (f" (+{len(value) - 6})" if len(value) > 6 else "")
        lines.append(f"      {label}: {value}")
    if f.failure_modes:
        lines.append(f"      failure modes: {', '.join(f.failure_modes[:5])}")
    return lines


def render_report(report: ProbeReport, *, max_rows: int = 40) -> str:
    ran = f"{report.steps} step(s)"
    if report.requested_steps and report.steps < report.requested_steps:
        ran = f"{report.steps} of {report.requested_steps} step(s)"
    if report.command:
        steps = report.observed_steps
        span = f"optimizer steps {steps[0]}..{steps[-1]}" if steps else "no optimizer step"
        head = f"Probe of `{report.command}`: {span} of the real run"
    else:
        head = f"Probe of {report.entrypoint}: {ran}, mode {report.mode}"
    lines = [
        f"{head}, {'healthy' if report.healthy else 'problems found'} ({len(report.findings)} finding(s))."
    ]
    if report.models:
        lines.append(
            "Models: "
            + "; ".join(
                f"{m.get('label')} ({m.get('type')}, {m.get('trainable', 0):,} trainable of {m.get('params', 0):,}"
                + (f", in {'/'.join(m['wrappers'])}" if m.get("wrappers") else "")
                + ")"
                for m in report.models
            )
        )
    if report.regime:
        lines.append(report.regime)
    if report.stopped:
        lines.append(f"Stopped early: {report.stopped}")
    for f in report.findings:
        lines.extend(finding_lines(f))
    if report.losses:
        lines.append("Losses: " + ", ".join(_fmt(x) for x in report.losses))
    if report.losses_by_optimizer:
        for opt, series in report.losses_by_optimizer.items():
            lines.append(f"Losses (optimizer {opt}): " + ", ".join(_fmt(x) for x in series))
    if report.nonfinite:
        nf = report.nonfinite
        lines.append(
            f"First NaN/Inf: step {nf.get('step')}, {nf.get('phase') or '?'}"
            + (f", module {nf['module']}" if nf.get("module") else "")
            + (f", operation `{nf['op']}`" if nf.get("op") else "")
        )
    for note in report.notes:
        lines.append(f"Note: {note}")
    if report.params:
        odd = [p for p in report.params if p.get("gradient") != "ok" or p.get("in_optimizer") is False]
        if odd:
            lines.append("")
            lines.append(f"{'parameter':48} {'gradient':13} {'optimizer':9} {'update':>9}")
            for p in odd[:20]:
                lines.append(
                    f"{str(p.get('name'))[:48]:48} {p.get('gradient')!s:13} "
                    f"{'yes' if p.get('in_optimizer') else 'NO':9} {_fmt(p.get('update_ratio')):>9}"
                )
    if report.state.get("changed"):
        lines.append(
            f"Buffers / frozen tensors that changed over the observed steps ({report.state.get('n_changed')} of "
            f"{report.state.get('tracked')}): " + ", ".join(c["name"] for c in report.state["changed"][:12])
        )
    if report.table:
        lines.append("")
        act = any(row.get("act_rms") for row in report.table)
        lines.append(
            f"{'module':40} {'type':16} {'grad_norm':>10} {'param_norm':>10} {'update':>9}"
            + (f" {'act_rms':>17}" if act else "")
        )
        for row in report.table[:max_rows]:
            rms = row.get("act_rms") or []
            lines.append(
                f"{str(row.get('module'))[:40]:40} {str(row.get('type') or '')[:16]:16} "
                f"{_fmt(row.get('grad_norm')):>10} {_fmt(row.get('param_norm')):>10} {_fmt(row.get('update_ratio')):>9}"
                + (f" {' -> '.join(_fmt(v) for v in rms):>17}" if act else "")
            )
        if len(report.table) > max_rows:
            lines.append(f"… {len(report.table) - max_rows} more modules in the structured output")
    if report.unknown_keys:
        lines.append(f"Ignored entrypoint keys: {', '.join(report.unknown_keys)}")
    return "\n".join(lines)


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    try:
        return f"{float(x):.3g}"
    except (TypeError, ValueError):
        return str(x)

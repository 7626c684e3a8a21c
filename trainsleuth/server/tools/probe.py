"""Gradient-probe tools (issue 5): `probe_gradients` and `read_probe_run`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from trainsleuth.server.registry import (
    AnalysisInput,
    AnalysisOutput,
    Entrypoint,
    ExistingPath,
    ReadPath,
    ToolCall,
    ToolFailure,
    ToolRegistry,
)
from trainsleuth.tools.findings import Finding

ISSUE = 5


class ProbeInput(AnalysisInput):
    command: str | None = Field(default=None, description="The training command you run.")
    entrypoint: Entrypoint | None = Field(default=None, description="Or file.py:fn (probe://entrypoint)")
    scaffold: ExistingPath | None = None
    script_args: list[str] = Field(default_factory=list)
    steps: int = Field(default=8, ge=1, le=200)
    start: int = Field(default=1, ge=1)
    python: str | None = None
    timeout_s: float = Field(default=600.0, ge=1, le=3600)
    memory_limit_mb: float | None = Field(default=None, gt=0)


class ProbeOutput(AnalysisOutput):
    entrypoint: str | None = None
    command: str | None = None
    scaffold_path: str | None = Field(default=None, description="the entrypoint file written for scaffold")
    interpreter: str
    steps: int
    mode: str
    healthy: bool
    findings: list[Finding]
    losses: list[float | str | None]
    global_grad_norms: list[float | str | None]
    table: list[dict[str, Any]] = Field(description="per-module gradient/parameter norms and update ratios")
    environment: dict[str, Any]
    unknown_keys: list[str] = Field(default_factory=list)
    requested_steps: int | None = None
    stopped: str | None = Field(default=None, description="why fewer steps ran than asked")
    notes: list[str] = Field(default_factory=list, description="what could not be judged, and why")
    fixed_batch: bool = Field(default=True, description="False: the run's own batches were observed")
    observed_steps: list[int] = Field(default_factory=list, description="the run's optimizer steps observed")
    lrs: list[Any] = Field(default_factory=list)
    losses_by_optimizer: dict[str, list[float | str | None]] | None = None
    models: list[dict[str, Any]] = Field(default_factory=list, description="the models the optimizers train")
    optimizers: list[dict[str, Any]] = Field(default_factory=list)
    params: list[dict[str, Any]] = Field(
        default_factory=list,
        description="per parameter: gradient per step, update, optimizer (the ones that matter)",
    )
    n_params: int | None = None
    state: dict[str, Any] = Field(default_factory=dict, description="buffers and frozen tensors that changed")
    nonfinite: dict[str, Any] | None = Field(
        default=None, description="first NaN/Inf: step, module, operation"
    )
    regimes: list[dict[str, str]] = Field(
        default_factory=list, description="the kinds of training recognised (name, because, effects)"
    )
    regime: str = Field(default="", description="one sentence: the regime assumed and what it changed")

    def render_text(self) -> str:
        from trainsleuth.tools.probe.report import ProbeReport, render_report

        report = ProbeReport.model_validate(self.model_dump(exclude={"healthy", "evidence_id"}))
        return render_report(report)

    def evidence_summary(self) -> str:
        target = self.command or self.entrypoint
        if self.healthy:
            return f"probe {target}: healthy over {self.steps} step(s)"
        codes = ", ".join(f"{f.code}@{f.module or '-'}" for f in self.findings if f.severity != "info")
        return f"probe {target}: {codes}"[:300]


class ReadProbeRunInput(AnalysisInput):
    run_dir: ReadPath


class ReadProbeRunOutput(AnalysisOutput):
    run_dir: str
    healthy: bool
    steps_recorded: int
    first_step: int | None
    last_step: int | None
    findings: list[Finding]
    trends: dict[str, list[tuple[int, float | str | None]]]
    table: list[dict[str, Any]]
    meta: dict[str, Any]
    skipped_lines: int = 0

    def render_text(self) -> str:
        lines = [
            f"Live probe run {self.run_dir}: {self.steps_recorded} recorded step(s) "
            f"({self.first_step}..{self.last_step}), {'healthy' if self.healthy else 'problems found'}."
        ]
        from trainsleuth.tools.probe.report import finding_lines

        for f in self.findings:
            lines += finding_lines(f)
        loss = self.trends.get("loss") or []
        if loss:
            lines.append("Loss trend: " + ", ".join(f"{s}:{v}" for s, v in loss[-12:]))
        return "\n".join(lines)

    def evidence_summary(self) -> str:
        codes = ", ".join(f.code for f in self.findings if f.severity != "info") or "healthy"
        return f"live probe run {self.run_dir}: {codes}"[:300]


def probe_gradients(args: ProbeInput, call: ToolCall) -> ProbeOutput:
    from trainsleuth.tools.probe.plot import grad_norm_png
    from trainsleuth.tools.probe.report import ProbeError, run_probe

    python = call.ctx.interpreter(args.python)
    given = [n for n in ("command", "entrypoint", "scaffold") if getattr(args, n) is not None]
    if len(given) != 1:
        raise ToolFailure(
            "give exactly one of command (the training command you run), entrypoint (file.py:function) and "
            f"scaffold (a training script); got {', '.join(given) if given else 'none'}",
            "pass command='python train.py --config configs/base.yaml' (see the probe://entrypoint resource)",
        )
    if args.command is not None:
        return _probe_command(args, call, python)
    scaffold_path = None
    entry: str | None
    if args.scaffold is not None:
        from trainsleuth.tools.probe.scaffold import write_scaffold

        try:
            written = write_scaffold(Path(args.scaffold), call.ctx.workspace, args.script_args)
        except ProbeError as exc:
            raise ToolFailure(exc.message, exc.next_step) from None
        entry = written.entrypoint
        scaffold_path = written.path
    else:
        entry = args.entrypoint  # resolved inside the workspace by the registry (Entrypoint)
    assert entry is not None
    call.progress(0, args.steps, f"probing {entry} with {python}")
    try:
        report = run_probe(
            entry,
            python=python,
            cwd=call.ctx.workspace,
            steps=args.steps,
            timeout_s=args.timeout_s,
            memory_limit_mb=args.memory_limit_mb,
            cancel_event=call.cancel_event,
        )
    except ProbeError as exc:
        message = exc.message
        if exc.detail and exc.kind in (
            "import_error",
            "entrypoint_raised",
            "step_raised",
            "runner_failed",
            "script_entrypoint",
        ):
            message += "\n" + exc.detail[-4000:]
        if scaffold_path:
            message = f"{message}\n(scaffold written to {scaffold_path})"
        raise ToolFailure(message, exc.next_step) from None
    call.progress(args.steps, args.steps, "probe finished")
    call.add_plot(lambda: grad_norm_png(report.layer_grad_rms, title=f"Gradient RMS per layer: {entry}"))
    return _output(report, scaffold_path=scaffold_path)


def _probe_command(args: ProbeInput, call: ToolCall, python: Path) -> ProbeOutput:
    """The user's own command under the observer: the real loop, steps start..start+steps-1."""
    from trainsleuth.tools.probe.observed import probe_command
    from trainsleuth.tools.probe.plot import grad_norm_png
    from trainsleuth.tools.probe.report import ProbeError

    assert args.command is not None
    call.progress(0, args.steps, f"running {args.command[:80]} under the observer")
    try:
        report = probe_command(
            args.command,
            python=python,
            workspace=call.ctx.workspace,
            steps=args.steps,
            start=args.start,
            timeout_s=args.timeout_s,
            memory_limit_mb=args.memory_limit_mb,
            cancel_event=call.cancel_event,
        )
    except ProbeError as exc:
        message = exc.message + (f"\n{exc.detail[-4000:]}" if exc.detail else "")
        raise ToolFailure(message, exc.next_step) from None
    call.progress(args.steps, args.steps, "probe finished")
    call.add_plot(lambda: grad_norm_png(report.layer_grad_rms, title="Gradient RMS per layer (observed run)"))
    return _output(report)


def _output(report: Any, scaffold_path: str | None = None) -> ProbeOutput:
    data = report.model_dump(exclude={"layer_grad_rms", "duration_s"})
    return ProbeOutput(scaffold_path=scaffold_path, healthy=report.healthy, **data)


def read_probe_run(args: ReadProbeRunInput, call: ToolCall) -> ReadProbeRunOutput:
    from trainsleuth.tools.probe.live import read_probe_run as read_run
    from trainsleuth.tools.probe.plot import grad_norm_png
    from trainsleuth.tools.probe.report import ProbeError

    try:
        report = read_run(Path(args.run_dir))
    except ProbeError as exc:
        raise ToolFailure(exc.message, exc.next_step) from None
    call.add_plot(lambda: grad_norm_png(report.layer_grad_rms, title="Gradient RMS per layer (live run)"))
    return ReadProbeRunOutput(
        run_dir=report.run_dir,
        healthy=report.healthy,
        steps_recorded=report.steps_recorded,
        first_step=report.first_step,
        last_step=report.last_step,
        findings=report.findings,
        trends=report.trends,
        table=report.table,
        meta=report.meta,
        skipped_lines=report.skipped_lines,
    )


def register(registry: ToolRegistry) -> None:
    registry.add(
        "probe_gradients",
        probe_gradients,
        input_model=ProbeInput,
        output_model=ProbeOutput,
        description="Investigating: your training command's first steps; where gradients break.",
        title="Probe gradients",
        read_only=False,
        destructive=True,
        idempotent=False,
        open_world=False,
        long_running=True,
        issue=ISSUE,
    )
    registry.add(
        "read_probe_run",
        read_probe_run,
        input_model=ReadProbeRunInput,
        output_model=ReadProbeRunOutput,
        description="Investigating: read what trainsleuth.probe.attach recorded.",
        title="Read probe run",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
        issue=ISSUE,
    )

"""Distributed, precision, checkpoint and environment tools (issue 6): `check_distributed`,
`compare_precision`, `dump_stacks`, `diff_checkpoints`, `environment_report`.

MCP wiring only: the capabilities live in `trainsleuth.tools.{distributed,precision,checkpoints,
environment}` and run user code through the standalone runners in the user's interpreter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from trainsleuth.server.registry import (
    AnalysisInput,
    AnalysisOutput,
    Entrypoint,
    ReadPath,
    ToolCall,
    ToolFailure,
    ToolRegistry,
)
from trainsleuth.tools.checkpoints.diff import CheckpointDiff
from trainsleuth.tools.distributed.check import DistributedReport
from trainsleuth.tools.distributed.errors import AnalysisError
from trainsleuth.tools.distributed.stacks import StacksReport
from trainsleuth.tools.environment.report import EnvironmentReport
from trainsleuth.tools.precision.compare import PrecisionReport

ISSUE = 6
Precision = Literal["bf16", "fp16"]
DEFAULT_DTYPES: tuple[Precision, ...] = ("bf16", "fp16")

ENTRYPOINT_DESCRIPTION = "file.py:fn (probe://entrypoint)"


# ---------------------------------------------------------------------------- inputs


class CheckDistributedInput(AnalysisInput):
    command: str | None = None
    entrypoint: Entrypoint | None = Field(default=None, description=ENTRYPOINT_DESCRIPTION)
    nproc: int = Field(default=2, ge=2, le=16)
    steps: int = Field(default=2, ge=1, le=100)
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    rtol: float = Field(default=1e-4, gt=0, description="Against one process.")
    rank_rtol: float = Field(default=1e-6, ge=0)
    python: str | None = None
    timeout_s: float = Field(default=300.0, ge=1, le=3600)
    hang_s: float = Field(default=90.0, ge=3, le=3600)  # seconds without progress that count as a hang


class ComparePrecisionInput(AnalysisInput):
    command: str | None = None
    entrypoint: Entrypoint | None = Field(default=None, description=ENTRYPOINT_DESCRIPTION)
    dtypes: list[Precision] = Field(default_factory=lambda: list(DEFAULT_DTYPES))
    rtol_bf16: float = Field(default=0.05, gt=0)
    rtol_fp16: float = Field(default=0.01, gt=0)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    python: str | None = None
    timeout_s: float = Field(default=180.0, ge=1, le=3600)


class DumpStacksInput(AnalysisInput):
    pids: list[int] = Field(default_factory=list)
    pattern: str | None = Field(default=None, description="Regex over command lines.")
    native: bool = False
    samples: int = Field(default=2, ge=1, le=10)
    interval_s: float = Field(default=1.0, ge=0.1, le=30)
    timeout_s: float = Field(default=30.0, ge=1, le=600)
    flight_recorder: ReadPath | None = Field(default=None)


class DiffCheckpointsInput(AnalysisInput):
    a: ReadPath = Field(description="torch.save, .safetensors or HF folder.")
    b: ReadPath | None = None
    entrypoint: Entrypoint | None = Field(default=None, description="Instead of b: its state_dict.")
    rtol: float = Field(default=0.0, ge=0)
    atol: float = Field(default=0.0, ge=0)
    python: str | None = None
    timeout_s: float = Field(default=300.0, ge=1, le=3600)


class EnvironmentInput(AnalysisInput):
    python: str | None = None
    compare_python: str | None = Field(default=None)
    import_torch: bool = True  # for the CUDA/cuDNN/NCCL versions
    timeout_s: float = Field(default=120.0, ge=1, le=600)


# ---------------------------------------------------------------------------- outputs


# The report's own render_text comes first in the MRO; the registry appends the evidence id.
class CheckDistributedOutput(DistributedReport, AnalysisOutput):
    pass


class ComparePrecisionOutput(PrecisionReport, AnalysisOutput):
    pass


class DumpStacksOutput(StacksReport, AnalysisOutput):
    pass


class DiffCheckpointsOutput(CheckpointDiff, AnalysisOutput):
    pass


class EnvironmentOutput(EnvironmentReport, AnalysisOutput):
    pass


# ---------------------------------------------------------------------------- policy helpers


def _fail(exc: AnalysisError) -> ToolFailure:
    return ToolFailure(exc.message, exc.next_step)


def _one_of(args: CheckDistributedInput | ComparePrecisionInput, example: str) -> None:
    if (args.command is None) == (args.entrypoint is None):
        raise ToolFailure(
            "give exactly one of command (the command you run) or entrypoint (file.py:fn)",
            f"pass command={example!r}, the exact command you run, or entrypoint='file.py:fn' for an A/B test",
        )


# ---------------------------------------------------------------------------- handlers


def check_distributed_tool(args: CheckDistributedInput, call: ToolCall) -> CheckDistributedOutput:
    from trainsleuth.tools.distributed.check import check_distributed
    from trainsleuth.tools.distributed.stacks import find_py_spy

    _one_of(args, "torchrun --nproc_per_node 2 train.py")
    python = call.ctx.interpreter(args.python)
    if args.command is not None:
        return _check_command(args, args.command, python, call)
    entry = args.entrypoint
    assert entry is not None
    call.progress(0, 1, f"starting {args.nproc} ranks under torchrun")
    try:
        report = check_distributed(
            entry,
            python=python,
            cwd=call.ctx.workspace,
            nproc=args.nproc,
            steps=args.steps,
            backend=args.backend,
            rtol=args.rtol,
            rank_rtol=args.rank_rtol,
            timeout_s=args.timeout_s,
            hang_s=args.hang_s,
            py_spy=find_py_spy(),
            cancel_event=call.cancel_event,
        )
    except AnalysisError as exc:
        raise _fail(exc) from None
    call.progress(1, 1, "done")
    report.entrypoint = entry
    return CheckDistributedOutput.model_validate(report.model_dump())


def _check_command(
    args: CheckDistributedInput, command: str, python: Path, call: ToolCall
) -> CheckDistributedOutput:
    from trainsleuth.tools.distributed.observed import check_command
    from trainsleuth.tools.distributed.stacks import find_py_spy

    call.progress(0, 1, "running the command with every rank observed")
    try:
        report = check_command(
            command,
            python=python,
            workspace=call.ctx.workspace,
            steps=args.steps,
            rank_rtol=args.rank_rtol,
            hang_s=args.hang_s,
            timeout_s=args.timeout_s,
            py_spy=find_py_spy(),
            cancel_event=call.cancel_event,
        )
    except AnalysisError as exc:
        raise _fail(exc) from None
    call.progress(1, 1, "done")
    return CheckDistributedOutput.model_validate(report.model_dump())


def compare_precision_tool(args: ComparePrecisionInput, call: ToolCall) -> ComparePrecisionOutput:
    from trainsleuth.tools.precision.compare import compare_precision
    from trainsleuth.tools.precision.observed import compare_command

    _one_of(args, "python train.py")
    python = call.ctx.interpreter(args.python)
    rtol = {k: v for k, v in (("bf16", args.rtol_bf16), ("fp16", args.rtol_fp16)) if v is not None}
    dtypes: list[str] = list(dict.fromkeys(args.dtypes))
    if args.command is not None:
        try:
            observed = compare_command(
                args.command,
                python=python,
                workspace=call.ctx.workspace,
                dtypes=dtypes,
                rtol=rtol,
                timeout_s=args.timeout_s,
                cancel_event=call.cancel_event,
            )
        except AnalysisError as exc:
            raise _fail(exc) from None
        return ComparePrecisionOutput.model_validate(observed.model_dump())
    entry = args.entrypoint
    assert entry is not None
    try:
        report = compare_precision(
            entry,
            python=python,
            cwd=call.ctx.workspace,
            dtypes=dtypes,
            rtol=rtol,
            device=args.device,
            timeout_s=args.timeout_s,
            cancel_event=call.cancel_event,
        )
    except AnalysisError as exc:
        raise _fail(exc) from None
    report.entrypoint = entry
    return ComparePrecisionOutput.model_validate(report.model_dump())


def dump_stacks_tool(args: DumpStacksInput, call: ToolCall) -> DumpStacksOutput:
    from trainsleuth.tools.distributed.stacks import dump_stacks

    try:
        report = dump_stacks(
            args.pids,
            args.pattern,
            workspaces=call.ctx.policy.workspaces,
            native=args.native,
            samples=args.samples,
            interval_s=args.interval_s,
            timeout_s=args.timeout_s,
            flight_recorder=Path(args.flight_recorder) if args.flight_recorder else None,
            cancel_event=call.cancel_event,
        )
    except AnalysisError as exc:
        raise _fail(exc) from None
    return DumpStacksOutput.model_validate(report.model_dump())


def diff_checkpoints_tool(args: DiffCheckpointsInput, call: ToolCall) -> DiffCheckpointsOutput:
    from trainsleuth.tools.checkpoints.diff import diff_checkpoints

    if (args.b is None) == (args.entrypoint is None):
        raise ToolFailure(
            "give exactly one of b (a second checkpoint) or entrypoint (a model to compare the checkpoint with)",
            "pass b='other.pt' or entrypoint='train.py:build'",
        )
    entry = args.entrypoint
    try:
        report = diff_checkpoints(
            Path(args.a),
            Path(args.b) if args.b else None,
            entrypoint=entry,
            python=lambda: call.ctx.interpreter(args.python),
            cwd=call.ctx.workspace,
            rtol=args.rtol,
            atol=args.atol,
            timeout_s=args.timeout_s,
            cancel_event=call.cancel_event,
        )
    except AnalysisError as exc:
        raise _fail(exc) from None
    if entry is not None:
        report.b = f"model of {args.entrypoint}"
    return DiffCheckpointsOutput.model_validate(report.model_dump())


def environment_report_tool(args: EnvironmentInput, call: ToolCall) -> EnvironmentOutput:
    from trainsleuth.tools.environment.report import environment_report

    pythons = [call.ctx.interpreter(args.python)]
    if args.compare_python:
        pythons.append(call.ctx.interpreter(args.compare_python))
    try:
        report = environment_report(
            pythons,
            cwd=call.ctx.workspace,
            import_torch=args.import_torch,
            timeout_s=args.timeout_s,
            cancel_event=call.cancel_event,
        )
    except AnalysisError as exc:
        raise _fail(exc) from None
    return EnvironmentOutput.model_validate(report.model_dump())


def register(registry: ToolRegistry) -> None:
    registry.add(
        "check_distributed",
        check_distributed_tool,
        input_model=CheckDistributedInput,
        output_model=CheckDistributedOutput,
        description="Multi-GPU: your torchrun command's ranks compared; hangs explained.",
        title="Check distributed",
        read_only=False,
        destructive=True,
        idempotent=False,
        open_world=False,
        long_running=True,
        issue=ISSUE,
    )
    registry.add(
        "compare_precision",
        compare_precision_tool,
        input_model=ComparePrecisionInput,
        output_model=ComparePrecisionOutput,
        description="Mixed precision: your command in fp32 vs bf16/fp16; first module to diverge.",
        title="Compare precision",
        read_only=False,
        destructive=True,
        idempotent=False,
        open_world=False,
        long_running=True,
        issue=ISSUE,
    )
    registry.add(
        "dump_stacks",
        dump_stacks_tool,
        input_model=DumpStacksInput,
        output_model=DumpStacksOutput,
        description="Hangs: all ranks' stacks and Flight Recorder records; mismatched collectives.",
        title="Dump stacks",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
        long_running=True,
        issue=ISSUE,
    )
    registry.add(
        "diff_checkpoints",
        diff_checkpoints_tool,
        input_model=DiffCheckpointsInput,
        output_model=DiffCheckpointsOutput,
        description="Resume or load problems: checkpoints (or one and a model) key by key.",
        title="Diff checkpoints",
        read_only=False,
        destructive=True,
        idempotent=False,
        open_world=False,
        long_running=True,
        issue=ISSUE,
    )
    registry.add(
        "environment_report",
        environment_report_tool,
        input_model=EnvironmentInput,
        output_model=EnvironmentOutput,
        description="Comparing with what works: library and CUDA versions of 1-2 envs.",
        title="Environment report",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
        long_running=True,
        issue=ISSUE,
    )

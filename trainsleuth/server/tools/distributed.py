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
    ExistingPath,
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

PYTHON_DESCRIPTION = (
    "interpreter that runs the user's code (default: the workspace's .venv, else the server's own); it must be "
    "inside a workspace, the server's own, or allowed with --allow-python"
)
ENTRYPOINT_DESCRIPTION = (
    "path/to/file.py:function (relative to the workspace) or package.module:function; the function returns "
    "{'model', 'batch' or 'batches', optional 'loss_fn', 'optimizer', 'step_fn', 'wrap_model'}"
)


# ---------------------------------------------------------------------------- inputs


class CheckDistributedInput(AnalysisInput):
    entrypoint: Entrypoint = Field(description=ENTRYPOINT_DESCRIPTION)
    nproc: int = Field(default=2, ge=2, le=16, description="number of ranks (processes) torchrun starts")
    steps: int = Field(default=2, ge=1, le=10, description="training steps per rank (2 reveals buffer drift)")
    backend: Literal["auto", "gloo", "nccl"] = Field(
        default="auto", description="auto: NCCL when enough GPUs are visible, else gloo on CPU"
    )
    rtol: float = Field(
        default=1e-4, gt=0, description="relative tolerance of loss/gradients against the single-process run"
    )
    rank_rtol: float = Field(
        default=1e-6,
        ge=0,
        description="relative difference across ranks above which a tensor counts as differing",
    )
    python: str | None = Field(default=None, description=PYTHON_DESCRIPTION)
    timeout_s: float = Field(default=300.0, gt=0, le=3600, description="kill the whole job after this")
    hang_s: float = Field(
        default=90.0,
        ge=3,
        le=3600,
        description="no rank making progress this long counts as a hang: stacks and Flight Recorder are read, job ended",
    )


class ComparePrecisionInput(AnalysisInput):
    entrypoint: Entrypoint = Field(description=ENTRYPOINT_DESCRIPTION)
    dtypes: list[Precision] = Field(
        default_factory=lambda: list(DEFAULT_DTYPES), description="reduced precisions to compare with fp32"
    )
    rtol_bf16: float | None = Field(
        default=None, gt=0, description="per-module relative tolerance (default 0.05)"
    )
    rtol_fp16: float | None = Field(
        default=None, gt=0, description="per-module relative tolerance (default 0.01)"
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="auto: where the entrypoint put the model"
    )
    python: str | None = Field(default=None, description=PYTHON_DESCRIPTION)
    timeout_s: float = Field(default=180.0, gt=0, le=3600)


class DumpStacksInput(AnalysisInput):
    pids: list[int] = Field(default_factory=list, description="process ids to dump")
    pattern: str | None = Field(
        default=None,
        description="regular expression over command lines: dumps every matching process (all ranks of a job) "
        "whose working directory is inside the workspace",
    )
    native: bool = Field(default=False, description="include native (C/C++) frames")
    samples: int = Field(
        default=2, ge=1, le=10, description="dumps taken interval_s apart (a hang is stable)"
    )
    interval_s: float = Field(default=1.0, ge=0.1, le=30)
    timeout_s: float = Field(default=30.0, gt=0, le=600, description="per py-spy dump")
    flight_recorder: ExistingPath | None = Field(
        default=None,
        description="folder of Flight Recorder dumps (<prefix><rank>, from TORCH_FR_DUMP_TEMP_FILE) or one rank's dump: "
        "matched across ranks beside the stacks; alone, for a job that already ended",
    )


class DiffCheckpointsInput(AnalysisInput):
    a: ExistingPath = Field(
        description="a checkpoint: torch.save file (nested dicts and Lightning files too), .safetensors, or a "
        "Hugging Face model folder"
    )
    b: ExistingPath | None = Field(default=None, description="the checkpoint to compare with (same forms)")
    entrypoint: Entrypoint | None = Field(
        default=None, description="instead of b: compare a with this entrypoint's model.state_dict()"
    )
    rtol: float = Field(default=0.0, ge=0, description="relative difference still counted as equal")
    atol: float = Field(default=0.0, ge=0, description="absolute difference still counted as equal")
    python: str | None = Field(default=None, description=PYTHON_DESCRIPTION)
    timeout_s: float = Field(default=300.0, gt=0, le=3600)


class EnvironmentInput(AnalysisInput):
    python: str | None = Field(default=None, description=PYTHON_DESCRIPTION)
    compare_python: str | None = Field(
        default=None, description="a second interpreter (e.g. the working environment) to diff against"
    )
    import_torch: bool = Field(
        default=True, description="import torch to read CUDA, cuDNN and NCCL versions (a few seconds)"
    )
    timeout_s: float = Field(default=120.0, gt=0, le=600)


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


# ---------------------------------------------------------------------------- handlers


def check_distributed_tool(args: CheckDistributedInput, call: ToolCall) -> CheckDistributedOutput:
    from trainsleuth.tools.distributed.check import check_distributed
    from trainsleuth.tools.distributed.stacks import find_py_spy

    entry = args.entrypoint
    python = call.ctx.interpreter(args.python)
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
    report.entrypoint = args.entrypoint
    return CheckDistributedOutput.model_validate(report.model_dump())


def compare_precision_tool(args: ComparePrecisionInput, call: ToolCall) -> ComparePrecisionOutput:
    from trainsleuth.tools.precision.compare import compare_precision

    entry = args.entrypoint
    python = call.ctx.interpreter(args.python)
    rtol = {k: v for k, v in (("bf16", args.rtol_bf16), ("fp16", args.rtol_fp16)) if v is not None}
    try:
        report = compare_precision(
            entry,
            python=python,
            cwd=call.ctx.workspace,
            dtypes=list(dict.fromkeys(args.dtypes)),
            rtol=rtol,
            device=args.device,
            timeout_s=args.timeout_s,
            cancel_event=call.cancel_event,
        )
    except AnalysisError as exc:
        raise _fail(exc) from None
    report.entrypoint = args.entrypoint
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
        description=(
            "Run the entrypoint on N ranks (gloo on CPU, NCCL on GPUs), wrapped as its 'wrap_model' does (default DDP), "
            "and compare parameters, buffers, state outside the model, gradients and losses across ranks before "
            "wrapping and at every step, and against one process. A rank that crashes or hangs is reported with "
            "its stack, log and Flight Recorder records; use it in the evidence phase for multi-GPU-only bugs."
        ),
        title="Check distributed",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
        issue=ISSUE,
    )
    registry.add(
        "compare_precision",
        compare_precision_tool,
        input_model=ComparePrecisionInput,
        output_model=ComparePrecisionOutput,
        description=(
            "Run one step of the entrypoint in fp32 and under bf16 / fp16 autocast from the same weights, compare "
            "every module's output and gradients, and report precision_mismatch at the first module beyond "
            "tolerance with its error figures."
        ),
        title="Compare precision",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
        issue=ISSUE,
    )
    registry.add(
        "dump_stacks",
        dump_stacks_tool,
        input_model=DumpStacksInput,
        output_model=DumpStacksOutput,
        description=(
            "py-spy stack dumps of given pids or of every process of a job matching a pattern, grouped by "
            "signature, beside the job's PyTorch Flight Recorder dumps matched across ranks when given. Reports "
            "collective_mismatch when ranks wait in different collectives or one never reached it (a hang)."
        ),
        title="Dump stacks",
        read_only=True,
        destructive=False,
        idempotent=True,
        open_world=False,
        issue=ISSUE,
    )
    registry.add(
        "diff_checkpoints",
        diff_checkpoints_tool,
        input_model=DiffCheckpointsInput,
        output_model=DiffCheckpointsOutput,
        description=(
            "Compare two checkpoints (torch.save, nested {'model': ..., 'optimizer': ...}, Lightning, safetensors, "
            "Hugging Face folders) or one against an entrypoint's model: keys, prefixes explained (module., "
            "_orig_mod.), shapes, dtypes, values, and what load_state_dict(strict=False) would really restore. "
            "torch files load with weights_only=True: a pickle that would run code is refused."
        ),
        title="Diff checkpoints",
        read_only=False,
        destructive=False,
        idempotent=True,
        open_world=False,
        issue=ISSUE,
    )
    registry.add(
        "environment_report",
        environment_report_tool,
        input_model=EnvironmentInput,
        output_model=EnvironmentOutput,
        description=(
            "Versions of Python, torch, CUDA, cuDNN, NCCL and the usual training libraries (transformers, "
            "diffusers, accelerate, deepspeed, peft, flash-attn, ...) and the CUDA_*/NCCL_*/TORCH_* variables "
            "of an interpreter; given two interpreters (working and broken), their differences."
        ),
        title="Environment report",
        read_only=True,
        destructive=False,
        idempotent=True,
        open_world=False,
        issue=ISSUE,
    )

"""Distributed, precision, checkpoint and environment tools (issue 6). Placeholders for now."""

from __future__ import annotations

from trainsleuth.server.registry import AnalysisInput, ToolRegistry, WorkspacePath

ISSUE = 6


class EntrypointInput(AnalysisInput):
    entrypoint: str


class DumpStacksInput(AnalysisInput):
    pids: list[int] = []
    pattern: str | None = None


class DiffCheckpointsInput(AnalysisInput):
    a: WorkspacePath
    b: WorkspacePath | None = None


class EnvironmentInput(AnalysisInput):
    python: str | None = None


def register(registry: ToolRegistry) -> None:
    registry.placeholder(
        "check_distributed",
        input_model=EntrypointInput,
        description="Run the entrypoint under torchrun and compare ranks with a single process.",
        title="Check distributed",
        read_only=False,
        idempotent=False,
        issue=ISSUE,
    )
    registry.placeholder(
        "compare_precision",
        input_model=EntrypointInput,
        description="Compare one step in fp32 against bf16/fp16 autocast, module by module.",
        title="Compare precision",
        read_only=False,
        idempotent=False,
        issue=ISSUE,
    )
    registry.placeholder(
        "dump_stacks",
        input_model=DumpStacksInput,
        description="py-spy stack dumps of a job's processes, grouped, with collective mismatches.",
        title="Dump stacks",
        issue=ISSUE,
    )
    registry.placeholder(
        "diff_checkpoints",
        input_model=DiffCheckpointsInput,
        description="Compare checkpoints (keys, shapes, dtypes, values) without executing pickles.",
        title="Diff checkpoints",
        issue=ISSUE,
    )
    registry.placeholder(
        "environment_report",
        input_model=EnvironmentInput,
        description="Versions of python, torch, CUDA, NCCL and training libraries; diff two environments.",
        title="Environment report",
        issue=ISSUE,
    )

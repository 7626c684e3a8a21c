"""Bisect and job tools (issue 7). Placeholders until bisect lands."""

from __future__ import annotations

from trainsleuth.server.registry import AnalysisInput, GitRef, ToolInput, ToolRegistry, WorkspacePath

ISSUE = 7


class BisectCommitsInput(AnalysisInput):
    repo: WorkspacePath
    good: GitRef
    bad: GitRef
    command: str


class BisectVersionsInput(AnalysisInput):
    package: str
    versions: list[str]
    command: str


class JobInput(ToolInput):
    job_id: str


def register(registry: ToolRegistry) -> None:
    registry.placeholder(
        "bisect_commits",
        input_model=BisectCommitsInput,
        description="Find the first bad commit, each candidate in its own worktree.",
        title="Bisect commits",
        issue=ISSUE,
        read_only=False,
        idempotent=False,
    )
    registry.placeholder(
        "bisect_versions",
        input_model=BisectVersionsInput,
        description="Find the first bad version of a dependency with one uv environment per version.",
        title="Bisect versions",
        issue=ISSUE,
        read_only=False,
        idempotent=False,
    )
    registry.placeholder(
        "get_job",
        input_model=JobInput,
        description="Status and result of a background job.",
        title="Get job",
        issue=ISSUE,
    )
    registry.placeholder(
        "cancel_job",
        input_model=JobInput,
        description="Cancel a background job and clean up after it.",
        title="Cancel job",
        issue=ISSUE,
        read_only=False,
        destructive=True,
    )

"""Training-log tools (issue 4). Placeholders until log analysis lands."""

from __future__ import annotations

from trainsleuth.server.registry import AnalysisInput, ToolRegistry, WorkspacePath

ISSUE = 4


class LogPathInput(AnalysisInput):
    path: WorkspacePath


def register(registry: ToolRegistry) -> None:
    registry.placeholder(
        "analyze_training_log",
        input_model=LogPathInput,
        description="Parse a training log or run folder and report anomalies (findings.md log codes).",
        title="Analyze training log",
        issue=ISSUE,
    )
    registry.placeholder(
        "extract_metrics",
        input_model=LogPathInput,
        description="Extract chosen metric series from a log, downsampled with extremes preserved.",
        title="Extract metrics",
        issue=ISSUE,
    )

"""Gradient-probe tools (issue 5). Placeholders until the probe lands."""

from __future__ import annotations

from trainsleuth.server.registry import AnalysisInput, ToolRegistry, WorkspacePath

ISSUE = 5


class ProbeInput(AnalysisInput):
    entrypoint: str
    steps: int = 3


class ReadProbeRunInput(AnalysisInput):
    run_dir: WorkspacePath


def register(registry: ToolRegistry) -> None:
    registry.placeholder(
        "probe_gradients",
        input_model=ProbeInput,
        description="Run the user's model for a few steps and localise gradient problems.",
        title="Probe gradients",
        issue=ISSUE,
        read_only=False,
        idempotent=False,
    )
    registry.placeholder(
        "read_probe_run",
        input_model=ReadProbeRunInput,
        description="Read findings and trends written by trainsleuth.probe.attach in a training loop.",
        title="Read probe run",
        issue=ISSUE,
    )

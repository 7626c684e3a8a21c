"""Protocol tools (issue 3). Placeholders until the state machine lands."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trainsleuth.server.registry import ToolInput, ToolRegistry, WorkspacePath

ISSUE = 3


class _Generic(ToolInput):
    investigation_id: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class StartInvestigationInput(ToolInput):
    symptom: str
    workspace: WorkspacePath | None = None
    reproducer: str | None = None


_TOOLS: dict[str, tuple[str, type[ToolInput], dict[str, bool]]] = {
    "start_investigation": ("Open an investigation for a training problem.", StartInvestigationInput, {}),
    "get_investigation": ("Show an investigation with its whole timeline.", _Generic, {}),
    "list_investigations": ("List the investigations in this workspace.", _Generic, {}),
    "record_evidence": ("Record evidence the assistant observed itself.", _Generic, {}),
    "propose_hypotheses": ("Propose 3-5 ranked hypotheses.", _Generic, {}),
    "resolve_hypothesis": ("Mark a hypothesis confirmed or ruled out citing evidence.", _Generic, {}),
    "submit_diagnosis": ("Submit the Gate-4 structured diagnosis.", _Generic, {}),
    "approve_diagnosis": ("Approve a diagnosis (who and their words).", _Generic, {}),
    "record_review": ("Record a critical review verdict.", _Generic, {}),
    "begin_fix": ("Begin a fix attempt on an approved diagnosis.", _Generic, {}),
    "verify_fix": ("Run the reproducer to verify a fix attempt.", _Generic, {}),
    "capture_knowledge": ("Close an investigation by capturing knowledge.", _Generic, {}),
}


def register(registry: ToolRegistry) -> None:
    for name, (description, model, _) in _TOOLS.items():
        registry.placeholder(
            name,
            input_model=model,
            description=description,
            title=name.replace("_", " ").capitalize(),
            issue=ISSUE,
            read_only=False,
            idempotent=False,
        )

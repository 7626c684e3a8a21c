"""Protocol tools: thin MCP wrappers over `trainsleuth.protocol.machine.Protocol`, one module per phase.

- `protocol_investigate.py`: start_investigation, get_investigation, list_investigations,
  record_evidence, propose_hypotheses, resolve_hypothesis;
- `protocol_diagnosis.py`: submit_diagnosis, record_review, approve_diagnosis;
- `protocol_fix.py`: begin_fix, verify_fix;
- `protocol_knowledge.py`: capture_knowledge (and abandoning);
- `protocol_common.py`: step outputs and how a person decides (elicitation, or a one-time code the
  server shows only on its own terminal/log).

Every refusal is a `ProtocolError(message, next_step)`, which the registry turns into an `isError: true`
result naming the missing step. This module registers the tools with their descriptions.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver.resolve import Resolve

from trainsleuth.server.registry import ToolRegistry
from trainsleuth.server.tools.protocol_common import PersonForm, protocol_for
from trainsleuth.server.tools.protocol_diagnosis import (
    ApproveDiagnosisInput,
    ApproveDiagnosisOutput,
    DiagnosisOutput,
    RecordReviewInput,
    RecordReviewOutput,
    SubmitDiagnosisInput,
    approve_diagnosis,
    finish_submit,
    make_approval_resolver,
    precheck_submit,
    record_review,
    submit_diagnosis,
)
from trainsleuth.server.tools.protocol_fix import (
    BeginFixInput,
    BeginFixOutput,
    VerifyFixInput,
    VerifyFixOutput,
    begin_fix,
    finish_verify,
    verify_fix,
)
from trainsleuth.server.tools.protocol_investigate import (
    FreshForm,
    GetInvestigationInput,
    GetInvestigationOutput,
    ListInvestigationsInput,
    ListInvestigationsOutput,
    ProposeHypothesesInput,
    ProposeHypothesesOutput,
    RecordEvidenceInput,
    RecordEvidenceOutput,
    ResolveHypothesisInput,
    ResolveHypothesisOutput,
    StartInvestigationInput,
    StartInvestigationOutput,
    get_investigation,
    list_investigations,
    make_fresh_resolver,
    propose_hypotheses,
    record_evidence,
    render_investigation,
    resolve_hypothesis,
    start_investigation,
)
from trainsleuth.server.tools.protocol_knowledge import (
    AbandonForm,
    CaptureKnowledgeInput,
    CaptureKnowledgeOutput,
    capture_knowledge,
    make_abandon_resolver,
)

ISSUE = 3


# ---------------------------------------------------------------------------- registration


def register(registry: ToolRegistry) -> None:
    add = registry.add
    registry.add(
        "start_investigation",
        start_investigation,
        input_model=StartInvestigationInput,
        output_model=StartInvestigationOutput,
        title="Start an investigation",
        description="First call: open an investigation.",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
        resolved={
            "fresh_confirmation": Annotated[
                ElicitationResult[FreshForm], Resolve(make_fresh_resolver(registry.ctx))
            ]
        },
    )
    add(
        "get_investigation",
        get_investigation,
        input_model=GetInvestigationInput,
        output_model=GetInvestigationOutput,
        title="Get an investigation",
        description="An investigation's state, evidence and timeline.",
        read_only=True,
        destructive=False,
        idempotent=True,
        open_world=False,
    )
    add(
        "list_investigations",
        list_investigations,
        input_model=ListInvestigationsInput,
        output_model=ListInvestigationsOutput,
        title="List investigations",
        description="This workspace's investigations and next steps.",
        read_only=True,
        destructive=False,
        idempotent=True,
        open_world=False,
    )
    add(
        "record_evidence",
        record_evidence,
        input_model=RecordEvidenceInput,
        output_model=RecordEvidenceOutput,
        title="Record evidence",
        description="Investigating: record what you observed as evidence.",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
    )
    add(
        "propose_hypotheses",
        propose_hypotheses,
        input_model=ProposeHypothesesInput,
        output_model=ProposeHypothesesOutput,
        title="Propose hypotheses",
        description="After investigating: ranked hypotheses, tested one at a time.",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
    )
    add(
        "resolve_hypothesis",
        resolve_hypothesis,
        input_model=ResolveHypothesisInput,
        output_model=ResolveHypothesisOutput,
        title="Resolve a hypothesis",
        description="Confirm or rule out the hypothesis under test.",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
    )
    add(
        "submit_diagnosis",
        submit_diagnosis,
        input_model=SubmitDiagnosisInput,
        output_model=DiagnosisOutput,
        title="Submit a diagnosis",
        description="Cause found: the diagnosis; its reproducer runs now.",
        read_only=False,
        destructive=True,  # it runs the reproducer
        idempotent=False,
        open_world=False,
        long_running=True,  # the reproducer's fail-first run may take minutes
        one_job_per="investigation_id",
        finish=finish_submit,
        precheck=precheck_submit,
    )
    add(
        "record_review",
        record_review,
        input_model=RecordReviewInput,
        output_model=RecordReviewOutput,
        title="Record a critical review",
        description="Confidence < 0.8: record a critical review.",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
    )
    registry.add(
        "approve_diagnosis",
        approve_diagnosis,
        input_model=ApproveDiagnosisInput,
        output_model=ApproveDiagnosisOutput,
        title="Approve a diagnosis",
        description="Before any fix: the person approves or rejects it.",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
        resolved={
            "approval": Annotated[
                ElicitationResult[PersonForm], Resolve(make_approval_resolver(registry.ctx))
            ]
        },
    )
    add(
        "begin_fix",
        begin_fix,
        input_model=BeginFixInput,
        output_model=BeginFixOutput,
        title="Begin a fix attempt",
        description="Start a fix attempt (approval starts the first).",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
    )
    add(
        "verify_fix",
        verify_fix,
        input_model=VerifyFixInput,
        output_model=VerifyFixOutput,
        title="Verify a fix attempt",
        description="After the one change: the server runs the reproducer.",
        read_only=False,
        destructive=True,
        idempotent=False,
        open_world=False,
        long_running=True,
        one_job_per="investigation_id",  # verifications run one at a time (the protocol locks too)
        finish=finish_verify,
    )
    registry.add(
        "capture_knowledge",
        capture_knowledge,
        resolved={
            "abandon_confirmation": Annotated[
                ElicitationResult[AbandonForm], Resolve(make_abandon_resolver(registry.ctx))
            ]
        },
        input_model=CaptureKnowledgeInput,
        output_model=CaptureKnowledgeOutput,
        title="Capture knowledge",
        description="Last step: close with the root-cause analysis.",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
    )


__all__ = ["ISSUE", "protocol_for", "register", "render_investigation"]

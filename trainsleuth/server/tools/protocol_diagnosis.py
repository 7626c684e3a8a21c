"""Protocol tools of phase 4: submit_diagnosis (Gate 4), record_review, approve_diagnosis."""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from mcp.server.elicitation import AcceptedElicitation, CancelledElicitation, DeclinedElicitation
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import Elicit
from pydantic import Field

from trainsleuth.protocol.decision import ApprovalRequest
from trainsleuth.protocol.ledger import ProtocolError
from trainsleuth.protocol.machine import Protocol
from trainsleuth.protocol.models import (
    Approval,
    DiagnosisSpec,
    DiagnosisView,
    ProposedFix,
    ReviewView,
    Verdict,
)
from trainsleuth.server.context import ServerContext
from trainsleuth.server.registry import ToolCall, ToolInput, WorkspacePath
from trainsleuth.server.tools.protocol_common import (
    NotAsked,
    PersonForm,
    StepOutput,
    approval_wait_s,
    client_name,
    command_text,
    elicitation_only,
    field_text,
    has_form_elicitation,
    iid,
    offer_code,
    proto,
    protocol_for,
    restate_step,
    step,
)


class ProposedFixInput(ToolInput):
    files: list[WorkspacePath] = Field(min_length=1)
    change: str


class SubmitDiagnosisInput(ToolInput):
    investigation_id: str = iid()
    symptom: str
    root_cause: str
    evidence_ids: list[str] = Field(min_length=1)
    mechanism: str  # why the cause produces the symptom
    proposed_fix: ProposedFixInput
    reproducer: str | None = Field(default=None, description="Required when start_investigation gave none.")
    reproducer_timeout_s: float | None = Field(default=None, ge=1, le=24 * 3600)
    side_effects: str = ""
    will_not_fix: str = ""
    confidence: float = Field(ge=0.0, le=1.0)
    alternatives_considered: list[str] = Field(default_factory=list)
    disproving_observation: str = Field(default="", description="Required when no hypothesis is confirmed.")
    disproof_looked_for: bool = False
    disproof_result: str | None = None
    hypothesis_id: str | None = None


class DiagnosisOutput(StepOutput):
    diagnosis: DiagnosisView
    approval_note: str | None = None

    def body(self) -> str:
        d = self.diagnosis
        lines = [f"Diagnosis {d.id} [{d.status}] (confidence {d.confidence:.2f}): {d.root_cause}"]
        if d.reproduction is not None:
            r = d.reproduction
            code = "timed out" if r.timed_out else f"exit code {r.exit_code}"
            lines.append(
                f"The server ran the reproducer on the unfixed tree: it fails ({code}); evidence {r.evidence_id}."
            )
        if self.approval_note:
            lines.append(self.approval_note)
        lines.append(f"Next step: {self.next_step}")
        return "\n".join(lines)


def _offer_code(call: ToolCall, p: Protocol, inv_id: str, diag: DiagnosisView) -> str | None:
    """For a client without dialogs, show the person the diagnosis and a code now (saves a call)."""
    if diag.status != "awaiting_approval" or has_form_elicitation(call.mcp_ctx) or elicitation_only(call, p):
        return None
    try:
        request = p.approval_request(inv_id, diag.id, check_tree=False)
    except ProtocolError:
        return None
    where = offer_code(call, p, "approve", inv_id, _target(request), render_for_approval(request), "approve")
    shown = f"the server has shown them the diagnosis and a one-time code on {where}, and " if where else ""
    return (
        f"This client cannot show the person a dialog: {shown}they can approve with `trainsleuth approve` in their "
        "own terminal. Ask them, then call approve_diagnosis right away (with the code, if they give you one): it "
        f"waits up to {approval_wait_s():g} s for their answer in the terminal, so there is no need to sleep first."
    )


def _offer_amendment_code(call: ToolCall, p: Protocol, inv_id: str) -> str:
    """After a pass with unapproved changes, show the person the amendment and a code at once."""
    request = p.approval_request(inv_id)
    if request.kind != "amendment" or elicitation_only(call, p):
        raise ProtocolError("no amendment to offer", None)
    where = offer_code(
        call, p, "approve", inv_id, _target(request), render_for_approval(request), "approve these changes"
    )
    shown = f"shown on {where} with a one-time code, and " if where else ""
    return (
        f"the person is asked about these changes ({shown}`trainsleuth approve` in their terminal shows them): undo "
        "them, or ask the person whether they approve, then call approve_diagnosis"
    )


def precheck_submit(raw: dict[str, Any], ctx: ServerContext) -> ProtocolError | None:
    """Gate 4 on the raw arguments, before the schema's refusal or the job that runs the reproducer: one
    refusal names everything, and nothing slow starts for a diagnosis the gate would refuse."""
    from trainsleuth.protocol.gate4 import draft_from_arguments

    inv_id = raw.get("investigation_id")
    if not isinstance(inv_id, str) or not inv_id.strip():
        return None
    return protocol_for(ctx).precheck_diagnosis(inv_id, draft_from_arguments(raw))


def submit_diagnosis(args: SubmitDiagnosisInput, call: ToolCall) -> DiagnosisOutput:
    data = args.model_dump(exclude={"investigation_id", "proposed_fix"})
    spec = DiagnosisSpec(
        **data, proposed_fix=ProposedFix(files=list(args.proposed_fix.files), change=args.proposed_fix.change)
    )
    p = proto(call)
    call.progress(0, None, "checking the diagnosis, then running the reproducer on the unfixed tree")
    diag = p.submit_diagnosis(args.investigation_id, spec, cancel_event=call.cancel_event)
    return DiagnosisOutput(
        investigation_id=args.investigation_id, diagnosis=diag, **step(call, args.investigation_id)
    )


def finish_submit(out: DiagnosisOutput, args: SubmitDiagnosisInput, call: ToolCall) -> DiagnosisOutput:
    """In the server that delivers the result (the job runs the reproducer in a process of its own): the
    diagnosis as it is now and, for a client without dialogs, the person shown it with a code at once."""
    p = proto(call)
    current = next((d for d in p.get(args.investigation_id).diagnoses if d.id == out.diagnosis.id), None)
    if current is not None:
        out.diagnosis = current
    out.approval_note = _offer_code(call, p, args.investigation_id, out.diagnosis)
    return restate_step(out, call, args.investigation_id)


class RecordReviewInput(ToolInput):
    investigation_id: str = iid()
    verdict: Verdict
    reviewer: str
    reasoning: str
    alternative_explanations: list[str] = Field(default_factory=list)
    missing_evidence: list[str] = Field(default_factory=list)
    diagnosis_id: str | None = None


class RecordReviewOutput(DiagnosisOutput):
    review: ReviewView

    def body(self) -> str:
        lines = [
            f"Review {self.review.id}: {self.review.verdict}; diagnosis {self.diagnosis.id} is now {self.diagnosis.status}."
        ]
        if self.approval_note:
            lines.append(self.approval_note)
        return "\n".join([*lines, f"Next step: {self.next_step}"])


def record_review(args: RecordReviewInput, call: ToolCall) -> RecordReviewOutput:
    p = proto(call)
    review, diag = p.record_review(
        args.investigation_id,
        args.verdict,
        args.reviewer,
        args.reasoning,
        args.alternative_explanations,
        args.missing_evidence,
        args.diagnosis_id,
    )
    note = _offer_code(call, p, args.investigation_id, diag)
    return RecordReviewOutput(
        investigation_id=args.investigation_id,
        diagnosis=diag,
        review=review,
        approval_note=note,
        **step(call, args.investigation_id),
    )


# ---------------------------------------------------------------------------- approval


class ApproveDiagnosisInput(ToolInput):
    investigation_id: str = iid()
    diagnosis_id: str | None = None
    code: str | None = None
    decision: Literal["approve", "reject"] = "approve"
    approver: str | None = None
    words: str | None = None


class ApproveDiagnosisOutput(DiagnosisOutput):
    decision: Literal["approve", "reject"]
    path: str
    amendment: list[str] = Field(default_factory=list)

    def body(self) -> str:
        verb = "approved" if self.decision == "approve" else "rejected"
        what = (
            f"Adding {', '.join(self.amendment)} to the fix of {self.diagnosis.id}"
            if self.amendment
            else f"Diagnosis {self.diagnosis.id}"
        )
        return f"{what} {verb} via {self.path.replace('_', ' ')}.\nNext step: {self.next_step}"


def _target(request: ApprovalRequest) -> str:
    if request.kind == "amendment":
        digest = hashlib.sha256("\n".join(sorted(request.files)).encode()).hexdigest()[:12]
        return f"{request.diagnosis.id}:amend:{digest}"
    return request.diagnosis.id


def render_for_approval(request: ApprovalRequest) -> str:
    d = request.diagnosis
    if request.kind == "amendment":
        lines = [
            f"trainsleuth asks you to approve a change beyond the approved fix of diagnosis {d.id}.",
            field_text("Root cause", d.root_cause),
            field_text("Approved change", d.proposed_fix.change),
            f"Files approved: {', '.join(d.proposed_fix.files)}",
            "The fix attempt ALSO changed (not approved so far):",
            *(f"  - {field_text('file', f)[6:]}" for f in request.files),
            "The reproducer passes with these changes. If one of them is the reproducer's own test, its "
            "configuration or the environment, approving lets a changed test count as a fix.",
            "Diff of the attempt (excerpt):",
            *(f"    | {line}" for line in request.diff[:3000].splitlines()),
            "",
            "Approve adding them to the fix, or reject (the attempt stays open until they are undone).",
        ]
        return "\n".join(lines)
    repro = d.reproduction
    lines = [
        f"trainsleuth asks you to approve diagnosis {d.id} before any fix is made.",
        "",
        field_text("Symptom", d.symptom),
        field_text("Root cause", d.root_cause),
        field_text("Mechanism", d.mechanism),
        field_text("Evidence", ", ".join(d.evidence_ids)),
        field_text("Proposed fix", d.proposed_fix.change),
        field_text("Files the fix may change (nothing else)", ", ".join(d.proposed_fix.files)),
        field_text("Side effects", d.side_effects or "none stated"),
        field_text("Will not fix", d.will_not_fix or "not stated"),
        f"Confidence: {d.confidence:.2f}",
        field_text(
            "Would be disproved by",
            f"{d.disproving_observation} ({'looked for' if d.disproof_looked_for else 'not looked for'})",
        ),
        "Reproducer (the fix counts only when this exact command passes and nothing else changed):",
        command_text(d.reproducer or ""),
    ]
    if repro is not None:
        code = "timed out" if repro.timed_out else f"exit code {repro.exit_code}"
        lines.append(f"The server ran it on the unfixed tree: it fails ({code}).")
    if d.failed_attempts:
        lines.append(f"Failed fix attempts on this problem so far: {d.failed_attempts} of 3.")
    for r in d.reviews:
        lines.append(field_text("Critical review", f"{r.verdict} by {r.reviewer}"))
    lines += [
        "",
        "Approve, or reject with a comment (a rejection sends the investigation back to hypotheses).",
    ]
    return "\n".join(lines)


def make_approval_resolver(sctx: ServerContext) -> Any:
    def ask_person_to_approve(
        investigation_id: str, diagnosis_id: str | None, ctx: Context
    ) -> Elicit[PersonForm] | NotAsked:
        if not has_form_elicitation(ctx):
            return NotAsked(kind="no_elicitation")
        try:
            request = protocol_for(sctx).approval_request(investigation_id, diagnosis_id)
        except ProtocolError as exc:
            return NotAsked(kind="refused", message=exc.message, next_step=exc.next_step)
        return Elicit(render_for_approval(request), PersonForm)

    return ask_person_to_approve


def approve_diagnosis(args: ApproveDiagnosisInput, call: ToolCall) -> ApproveDiagnosisOutput:
    p = proto(call)
    outcome = call.resolved.get("approval")
    asked = outcome.data if isinstance(outcome, AcceptedElicitation) else None
    if isinstance(asked, NotAsked) and asked.kind == "refused":
        raise ProtocolError(asked.message, asked.next_step)  # already in the audit trail
    elicited = isinstance(asked, PersonForm) or isinstance(
        outcome, (DeclinedElicitation, CancelledElicitation)
    )
    request = p.approval_request(args.investigation_id, args.diagnosis_id, check_tree=not elicited)
    client = client_name(call.mcp_ctx)
    if isinstance(asked, PersonForm):
        approval = Approval(
            path="elicitation",
            decision=asked.decision,
            approver=asked.name.strip() or "the person at the client",
            words=asked.comment.strip() or None,
            at=p.clock(),
            client=client,
        )
    elif isinstance(outcome, DeclinedElicitation):
        approval = Approval(
            path="elicitation",
            decision="reject",
            approver="the person at the client",
            words="declined in the client's approval dialog",
            at=p.clock(),
            client=client,
        )
    elif isinstance(outcome, CancelledElicitation):
        p.record_cancelled_approval(
            args.investigation_id, request.diagnosis.id, "the approval dialog was dismissed"
        )
        raise ProtocolError(
            f"the person dismissed the approval dialog: diagnosis {request.diagnosis.id} is still awaiting approval",
            "call approve_diagnosis again when the person is ready to decide",
        )
    elif args.decision == "reject":
        # Saying no needs no proof: it only sends the investigation back.
        approval = Approval(
            path="approve_diagnosis",
            decision="reject",
            approver=(args.approver or "").strip() or None,
            words=(args.words or "").strip() or None,
            at=p.clock(),
            client=client,
        )
    else:
        from trainsleuth.server.tools.protocol_common import person_by_code

        approval = person_by_code(
            call,
            p,
            purpose="approve",
            inv_id=args.investigation_id,
            target=_target(request),
            code=args.code,
            shown=render_for_approval(request),
            approver=args.approver,
            words=args.words,
            ask="approve",
        )
    diag = p.decide(args.investigation_id, request, approval)
    return ApproveDiagnosisOutput(
        investigation_id=args.investigation_id,
        diagnosis=diag,
        decision=approval.decision,
        path=approval.path,
        amendment=request.files if request.kind == "amendment" else [],
        **step(call, args.investigation_id),
    )

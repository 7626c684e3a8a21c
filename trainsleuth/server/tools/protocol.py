"""Protocol tools (issue 3): thin MCP wrappers over `trainsleuth.protocol.machine.Protocol`.

Every refusal is a `ProtocolError(message, next_step)`, which the registry turns into an
`isError: true` result naming the missing step. Approval goes through elicitation when the client
supports it (SDK `Resolve`/`Elicit`, which works on both protocol revisions); otherwise the
`approve_diagnosis` fallback needs the approver and their words, unless the server was started
with `elicitation_only`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.elicitation import (
    AcceptedElicitation,
    CancelledElicitation,
    DeclinedElicitation,
    ElicitationResult,
)
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel, Field

from trainsleuth.protocol.ledger import ProtocolError
from trainsleuth.protocol.machine import Protocol
from trainsleuth.protocol.models import (
    AttemptView,
    DiagnosisSpec,
    DiagnosisView,
    HypothesisOutcome,
    HypothesisSpec,
    HypothesisView,
    InvestigationSummary,
    InvestigationView,
    Pathway,
    ProposedFix,
    Reproducible,
    ReviewView,
    Suggestion,
    Verdict,
)
from trainsleuth.server.context import ServerContext
from trainsleuth.server.registry import (
    ToolCall,
    ToolInput,
    ToolOutput,
    ToolRegistry,
    WorkspacePath,
    paginate,
)

ISSUE = 3
log = logging.getLogger("trainsleuth.protocol")


def protocol_for(ctx: ServerContext) -> Protocol:
    return Protocol(ctx.store)


def state_dir(ctx: ServerContext) -> Path:
    return ctx.state_path.parent


def _iid() -> Any:
    return Field()


# ---------------------------------------------------------------------------- start / get / list


class StartInvestigationInput(ToolInput):
    symptom: str
    expected: str | None = None
    observed: str | None = None
    started_when: str | None = None
    what_changed: str | None = Field(default=None, description="Commit, config, env, version...")
    reproducible: Reproducible = "unknown"
    reproducer: str | None = Field(
        default=None, description="Shell command that fails now and passes once fixed."
    )
    reproducer_timeout_s: float = Field(default=600, gt=0, le=24 * 3600)
    workspace: WorkspacePath | None = None
    pathway: Pathway | None = None


class StartInvestigationOutput(ToolOutput):
    investigation_id: str
    phase: str
    pathway: Pathway
    pathway_reason: str
    next_step: str
    suggestions: list[Suggestion] = Field(default_factory=list)
    suggestions_note: str | None = None

    def render_text(self) -> str:
        lines = [
            f"Investigation {self.investigation_id} opened ({self.pathway} pathway: {self.pathway_reason}).",
            f"Next step: {self.next_step}",
        ]
        if self.suggestions:
            lines.append("Most relevant checklists and constraints:")
            lines += [
                f"- [{s.kind}] {s.id}: {s.title}" + (f" ({s.pointer})" if s.pointer else "")
                for s in self.suggestions
            ]
        if self.suggestions_note:
            lines.append(self.suggestions_note)
        return "\n".join(lines)


def _suggestions(workspace: Path, text: str) -> tuple[list[Suggestion], str | None]:
    try:
        from trainsleuth.knowledge.lookup import suggest_for_symptom

        raw = suggest_for_symptom(workspace, text, 5)
    except Exception as exc:  # the knowledge base is advisory: never block an investigation on it
        log.warning("knowledge suggestions failed: %s", exc)
        return [], f"knowledge suggestions unavailable: {type(exc).__name__}: {exc}"
    out = []
    for item in raw or []:
        try:
            out.append(
                Suggestion(
                    kind=str(item.get("kind", "")),
                    id=str(item.get("id", "")),
                    title=str(item.get("title", "")),
                    pointer=item.get("pointer"),
                    score=item.get("score"),
                )
            )
        except Exception:
            continue
    note = None if out else "no matching checklists or constraints found in the knowledge base"
    return out, note


def start_investigation(args: StartInvestigationInput, call: ToolCall) -> StartInvestigationOutput:
    workspace = Path(args.workspace) if args.workspace else call.ctx.workspace
    if not workspace.is_dir():
        raise ProtocolError(
            f"the workspace {workspace} is not a folder", "pass the project folder as workspace"
        )
    text = " ".join(filter(None, [args.symptom, args.expected, args.observed, args.what_changed]))
    suggestions, note = _suggestions(workspace, text)
    view = _proto(call).start(
        symptom=args.symptom,
        workspace=workspace,
        expected=args.expected,
        observed=args.observed,
        started_when=args.started_when,
        what_changed=args.what_changed,
        reproducible=args.reproducible,
        reproducer=args.reproducer,
        reproducer_timeout_s=args.reproducer_timeout_s,
        pathway=args.pathway,
        suggestions=suggestions,
    )
    return StartInvestigationOutput(
        investigation_id=view.id,
        phase=view.phase,
        pathway=view.pathway,
        pathway_reason=view.pathway_reason,
        next_step=view.next_step,
        suggestions=suggestions,
        suggestions_note=note,
    )


class GetInvestigationInput(ToolInput):
    investigation_id: str = _iid()
    include_evidence_data: bool = False
    timeline_cursor: str | None = None
    timeline_limit: int = Field(default=100, ge=1, le=500)


class GetInvestigationOutput(ToolOutput):
    investigation: InvestigationView
    timeline_next_cursor: str | None = None

    def render_text(self) -> str:
        return render_investigation(self.investigation)


def render_investigation(v: InvestigationView) -> str:
    lines = [
        f"# Investigation {v.id}: {v.symptom}",
        f"Phase: {v.phase}; pathway: {v.pathway}"
        + (f" (escalated: {v.escalation['reason']})" if v.escalation else ""),
        f"Next step: {v.next_step}",
        f"Reproducer: {v.reproducer or 'none recorded'}",
    ]
    if v.evidence:
        lines.append(f"\nEvidence ({len(v.evidence)}):")
        lines += [f"- {e.id} [{e.source}] {e.summary[:200]}" for e in v.evidence[-30:]]
    if v.hypotheses:
        lines.append("\nHypotheses:")
        lines += [f"- {h.id} r{h.round}#{h.rank} [{h.status}] {h.statement[:160]}" for h in v.hypotheses]
    if v.diagnoses:
        lines.append("\nDiagnoses:")
        lines += [
            f"- {d.id} [{d.status}] conf {d.confidence:.2f}, failed attempts {d.failed_attempts}: {d.root_cause[:160]}"
            for d in v.diagnoses
        ]
    if v.attempts:
        lines.append("\nFix attempts:")
        lines += [
            f"- {a.id} #{a.number} [{a.status}] exit {a.exit_code}; files: {', '.join(a.changed_files) or '-'}"
            + (f"; warnings: {'; '.join(a.warnings)}" if a.warnings else "")
            for a in v.attempts
        ]
    if v.three_strike_report:
        lines += ["", v.three_strike_report]
    if v.timeline:
        lines.append("\nTimeline:")
        lines += [f"- {t.at_iso} [{t.kind} -> {t.phase}] {t.summary[:200]}" for t in v.timeline]
    return "\n".join(lines)


def get_investigation(args: GetInvestigationInput, call: ToolCall) -> GetInvestigationOutput:
    view = _proto(call).get(args.investigation_id)
    page, nxt = paginate(view.timeline, args.timeline_cursor, args.timeline_limit)
    view.timeline = page
    if not args.include_evidence_data:
        for e in view.evidence:
            e.data = None
    return GetInvestigationOutput(investigation=view, timeline_next_cursor=nxt)


class ListInvestigationsInput(ToolInput):
    include_closed: bool = True
    cursor: str | None = None
    limit: int = Field(default=50, ge=1, le=200)


class ListInvestigationsOutput(ToolOutput):
    investigations: list[InvestigationSummary]
    next_cursor: str | None = None

    def render_text(self) -> str:
        if not self.investigations:
            return "No investigations in this workspace. Open one with start_investigation."
        return "\n".join(
            f"- {i.id} [{i.phase}, {i.pathway}] {i.symptom[:120]} -> next: {i.next_step[:120]}"
            for i in self.investigations
        ) + (f"\n(more: cursor {self.next_cursor})" if self.next_cursor else "")


def list_investigations(args: ListInvestigationsInput, call: ToolCall) -> ListInvestigationsOutput:
    items = _proto(call).list_all(include_closed=args.include_closed)
    page, nxt = paginate(items, args.cursor, args.limit)
    return ListInvestigationsOutput(investigations=page, next_cursor=nxt)


# ---------------------------------------------------------------------------- evidence and hypotheses


class RecordEvidenceInput(ToolInput):
    investigation_id: str = _iid()
    summary: str
    data: dict[str, Any] | list[Any] | str | None = Field(
        default=None, description="Numbers, output, file:line."
    )


class StepOutput(ToolOutput):
    investigation_id: str
    phase: str
    next_step: str
    notices: list[str] = Field(
        default_factory=list, description="Protocol changes that happened during this call (e.g. escalation)."
    )

    def body(self) -> str:
        return f"Next step: {self.next_step}"

    def render_text(self) -> str:
        return "".join(f"Notice: {n}\n" for n in self.notices) + self.body()


class RecordEvidenceOutput(StepOutput):
    evidence_id: str

    def body(self) -> str:
        return (
            f"Recorded evidence {self.evidence_id} on {self.investigation_id}.\nNext step: {self.next_step}"
        )


def _proto(call: ToolCall) -> Protocol:
    """One Protocol per tool call, so notices raised during the call reach its output."""
    proto = getattr(call, "_protocol", None)
    if proto is None:
        proto = protocol_for(call.ctx)
        call._protocol = proto  # type: ignore[attr-defined]
    return proto


def _step(call: ToolCall, inv_id: str) -> dict[str, Any]:
    proto = _proto(call)
    view = proto.get(inv_id)
    return {"phase": view.phase, "next_step": view.next_step, "notices": list(proto.notices)}


def record_evidence(args: RecordEvidenceInput, call: ToolCall) -> RecordEvidenceOutput:
    ev_id = _proto(call).record_evidence(args.investigation_id, args.summary, args.data)
    step = _step(call, args.investigation_id)
    return RecordEvidenceOutput(investigation_id=args.investigation_id, evidence_id=ev_id, **step)


class ProposeHypothesesInput(ToolInput):
    investigation_id: str = _iid()
    hypotheses: list[HypothesisSpec] = Field(description="3-5, most likely first.")


class ProposeHypothesesOutput(StepOutput):
    hypotheses: list[HypothesisView]
    under_test: str

    def body(self) -> str:
        lines = [f"Hypotheses for {self.investigation_id} (one under test at a time):"]
        lines += [f"- {h.id} #{h.rank} [{h.status}] {h.statement}" for h in self.hypotheses]
        lines.append(f"Next step: {self.next_step}")
        return "\n".join(lines)


def propose_hypotheses(args: ProposeHypothesesInput, call: ToolCall) -> ProposeHypothesesOutput:
    hyps = _proto(call).propose_hypotheses(args.investigation_id, args.hypotheses)
    step = _step(call, args.investigation_id)
    under = next(h.id for h in hyps if h.status == "testing")
    return ProposeHypothesesOutput(
        investigation_id=args.investigation_id, hypotheses=hyps, under_test=under, **step
    )


class ResolveHypothesisInput(ToolInput):
    investigation_id: str = _iid()
    hypothesis_id: str
    outcome: HypothesisOutcome
    evidence_ids: list[str] = Field(default_factory=list, description="At least one.")
    note: str | None = None


class ResolveHypothesisOutput(StepOutput):
    hypothesis: HypothesisView
    now_testing: HypothesisView | None = None

    def body(self) -> str:
        text = f"Hypothesis {self.hypothesis.id} {self.hypothesis.status.replace('_', ' ')}."
        if self.now_testing:
            text += f"\nNow under test: {self.now_testing.id}: {self.now_testing.statement}"
        return text + f"\nNext step: {self.next_step}"


def resolve_hypothesis(args: ResolveHypothesisInput, call: ToolCall) -> ResolveHypothesisOutput:
    hyp, nxt = _proto(call).resolve_hypothesis(
        args.investigation_id, args.hypothesis_id, args.outcome, args.evidence_ids, args.note
    )
    step = _step(call, args.investigation_id)
    return ResolveHypothesisOutput(
        investigation_id=args.investigation_id, hypothesis=hyp, now_testing=nxt, **step
    )


# ---------------------------------------------------------------------------- Gate 4, review, approval


class ProposedFixInput(ToolInput):
    files: list[WorkspacePath] = Field(default_factory=list)
    change: str = Field(description="The one change.")


class SubmitDiagnosisInput(ToolInput):
    investigation_id: str = _iid()
    symptom: str
    root_cause: str
    evidence_ids: list[str] = Field(default_factory=list)
    mechanism: str = Field(description="Why the cause produces the symptom.")
    proposed_fix: ProposedFixInput
    side_effects: str = ""
    will_not_fix: str = ""
    confidence: float = Field(ge=0.0, le=1.0)
    alternatives_considered: list[str] = Field(default_factory=list)
    disproving_observation: str = Field(default="", description="What would disprove the cause.")
    disproof_looked_for: bool = False
    disproof_result: str | None = None
    hypothesis_id: str | None = None


class DiagnosisOutput(StepOutput):
    diagnosis: DiagnosisView

    def body(self) -> str:
        d = self.diagnosis
        return (
            f"Diagnosis {d.id} [{d.status}] (confidence {d.confidence:.2f}): {d.root_cause}\n"
            f"Next step: {self.next_step}"
        )


def submit_diagnosis(args: SubmitDiagnosisInput, call: ToolCall) -> DiagnosisOutput:
    data = args.model_dump(exclude={"investigation_id", "proposed_fix"})
    spec = DiagnosisSpec(
        **data, proposed_fix=ProposedFix(files=list(args.proposed_fix.files), change=args.proposed_fix.change)
    )
    diag = _proto(call).submit_diagnosis(args.investigation_id, spec)
    step = _step(call, args.investigation_id)
    return DiagnosisOutput(investigation_id=args.investigation_id, diagnosis=diag, **step)


class RecordReviewInput(ToolInput):
    investigation_id: str = _iid()
    verdict: Verdict
    reviewer: str
    reasoning: str
    alternative_explanations: list[str] = Field(default_factory=list)
    missing_evidence: list[str] = Field(default_factory=list)
    diagnosis_id: str | None = None


class RecordReviewOutput(DiagnosisOutput):
    review: ReviewView

    def body(self) -> str:
        return (
            f"Review {self.review.id}: {self.review.verdict}; diagnosis {self.diagnosis.id} is now "
            f"{self.diagnosis.status}.\nNext step: {self.next_step}"
        )


def record_review(args: RecordReviewInput, call: ToolCall) -> RecordReviewOutput:
    review, diag = _proto(call).record_review(
        args.investigation_id,
        args.verdict,
        args.reviewer,
        args.reasoning,
        args.alternative_explanations,
        args.missing_evidence,
        args.diagnosis_id,
    )
    step = _step(call, args.investigation_id)
    return RecordReviewOutput(investigation_id=args.investigation_id, diagnosis=diag, review=review, **step)


class ApprovalForm(BaseModel):
    """What the person answers in the client's approval dialog."""

    decision: Literal["approve", "reject"] = Field(description="Approve the diagnosis, or reject it.")
    comment: str = Field(default="", description="Your words: why, or what to look at instead.")
    name: str = Field(default="", description="Your name, for the audit trail.")


class _NotAsked(BaseModel):
    """The resolver's answer when the person was not asked (no elicitation, or not approvable)."""

    kind: Literal["no_elicitation", "refused"]
    message: str = ""
    next_step: str | None = None


class ApproveDiagnosisInput(ToolInput):
    investigation_id: str = _iid()
    diagnosis_id: str | None = None
    approver: str | None = Field(default=None, description="Without a dialog: the person's name.")
    words: str | None = Field(default=None, description="And their own words.")
    decision: Literal["approve", "reject"] = "approve"


class ApproveDiagnosisOutput(DiagnosisOutput):
    decision: Literal["approve", "reject"]
    path: Literal["elicitation", "approve_diagnosis"]

    def body(self) -> str:
        verb = "approved" if self.decision == "approve" else "rejected"
        return f"Diagnosis {self.diagnosis.id} {verb} via {self.path}.\nNext step: {self.next_step}"


def _client_has_form_elicitation(ctx: Context) -> bool:
    try:
        caps = ctx.client_capabilities
    except Exception:
        return False
    elicitation = caps.elicitation if caps is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def render_for_approval(d: DiagnosisView) -> str:
    lines = [
        f"trainsleuth asks you to approve diagnosis {d.id} before any fix is made.",
        "",
        f"Symptom: {d.symptom}",
        f"Root cause: {d.root_cause}",
        f"Mechanism: {d.mechanism}",
        f"Evidence: {', '.join(d.evidence_ids)}",
        f"Proposed fix: {d.proposed_fix.change}"
        + (f" (files: {', '.join(d.proposed_fix.files)})" if d.proposed_fix.files else ""),
        f"Side effects: {d.side_effects or 'none stated'}",
        f"Will not fix: {d.will_not_fix or 'not stated'}",
        f"Confidence: {d.confidence:.2f}",
        f"Would be disproved by: {d.disproving_observation} "
        f"({'looked for' if d.disproof_looked_for else 'not looked for'})",
    ]
    for r in d.reviews:
        lines.append(f"Critical review: {r.verdict} by {r.reviewer}")
    lines += [
        "",
        "Approve, or reject with a comment (a rejection sends the investigation back to hypotheses).",
    ]
    return "\n".join(lines)


def _make_approval_resolver(sctx: ServerContext) -> Any:
    def ask_person_to_approve(
        investigation_id: str, diagnosis_id: str | None, ctx: Context
    ) -> Elicit[ApprovalForm] | _NotAsked:
        try:
            diag = protocol_for(sctx).approvable(investigation_id, diagnosis_id)
        except ProtocolError as exc:
            return _NotAsked(kind="refused", message=exc.message, next_step=exc.next_step)
        if not _client_has_form_elicitation(ctx):
            return _NotAsked(kind="no_elicitation")
        return Elicit(render_for_approval(diag), ApprovalForm)

    return ask_person_to_approve


def _fallback_person(
    call: ToolCall,
    proto: Protocol,
    investigation_id: str,
    outcome: Any,
    approver: str | None,
    words: str | None,
    *,
    elicitation_only: tuple[str, str],
    missing: tuple[str, str],
) -> tuple[str, str]:
    """A person's decision without elicitation: refused where the resolver refused, where the server
    accepts only elicitation, or without who decided and their own words; else (approver, words)."""
    not_asked = outcome.data if isinstance(outcome, AcceptedElicitation) else None
    if isinstance(not_asked, _NotAsked) and not_asked.kind == "refused":
        raise ProtocolError(not_asked.message, not_asked.next_step)
    if call.ctx.config.elicitation_only:
        raise proto.refuse(investigation_id, *elicitation_only)
    given = {"approver": (approver or "").strip(), "words": (words or "").strip()}
    absent = [name for name, value in given.items() if not value]
    if absent:
        raise ProtocolError(f"{missing[0]}; missing: {', '.join(absent)}", missing[1])
    return given["approver"], given["words"]


def approve_diagnosis(args: ApproveDiagnosisInput, call: ToolCall) -> ApproveDiagnosisOutput:
    proto = _proto(call)
    outcome = call.resolved.get("approval")
    refused = outcome.data if isinstance(outcome, AcceptedElicitation) else None
    if isinstance(refused, _NotAsked) and refused.kind == "refused":
        raise ProtocolError(refused.message, refused.next_step)  # already in the audit trail
    diag = proto.approvable(args.investigation_id, args.diagnosis_id)
    path: Literal["elicitation", "approve_diagnosis"]
    if isinstance(outcome, AcceptedElicitation) and isinstance(outcome.data, ApprovalForm):
        form = outcome.data
        path = "elicitation"
        decision = form.decision
        diag = proto.decide(
            args.investigation_id,
            diag.id,
            decision=decision,
            path=path,
            approver=form.name.strip() or "the person at the client",
            words=form.comment.strip() or None,
        )
    elif isinstance(outcome, DeclinedElicitation):
        path, decision = "elicitation", "reject"
        diag = proto.decide(
            args.investigation_id,
            diag.id,
            decision=decision,
            path=path,
            approver="the person at the client",
            words="declined to approve in the client's approval dialog",
        )
    elif isinstance(outcome, CancelledElicitation):
        proto.record_cancelled_approval(args.investigation_id, diag.id, "the approval dialog was dismissed")
        raise ProtocolError(
            f"the person dismissed the approval dialog: diagnosis {diag.id} is still awaiting approval",
            "call approve_diagnosis again when the person is ready to decide",
        )
    else:
        approver, words = _fallback_person(
            call,
            proto,
            args.investigation_id,
            outcome,
            args.approver,
            args.words,
            elicitation_only=(
                "this server accepts diagnosis approval only through elicitation, and this client did not "
                "declare elicitation support",
                "approve from a client that supports elicitation (form mode), or restart the server without "
                "elicitation-only",
            ),
            missing=(
                "this client cannot ask the person directly (no elicitation), so approve_diagnosis must carry "
                "who approved and their own words",
                "show the diagnosis to the person, ask for approval, and call approve_diagnosis with approver "
                "(their name) and words (what they said)",
            ),
        )
        path, decision = "approve_diagnosis", args.decision
        diag = proto.decide(
            args.investigation_id, diag.id, decision=decision, path=path, approver=approver, words=words
        )
    step = _step(call, args.investigation_id)
    return ApproveDiagnosisOutput(
        investigation_id=args.investigation_id,
        diagnosis=diag,
        decision=decision,
        path=path,
        **step,
    )


# ---------------------------------------------------------------------------- fixes


class BeginFixInput(ToolInput):
    investigation_id: str = _iid()
    description: str = Field(description="The one change this attempt makes.")
    reproducer: str | None = None


class BeginFixOutput(StepOutput):
    attempt: AttemptView

    def body(self) -> str:
        a = self.attempt
        return (
            f"Fix attempt {a.number} ({a.id}) begun on diagnosis {a.diagnosis_id}; repository state recorded at "
            f"HEAD {(a.base_head or 'none')[:10]}"
            + (" plus uncommitted changes" if a.was_dirty else "")
            + f" ({a.snapshot_ref}).\nNext step: {self.next_step}"
        )


def begin_fix(args: BeginFixInput, call: ToolCall) -> BeginFixOutput:
    attempt = _proto(call).begin_fix(
        args.investigation_id, args.description, args.reproducer, state_dir(call.ctx)
    )
    step = _step(call, args.investigation_id)
    return BeginFixOutput(investigation_id=args.investigation_id, attempt=attempt, **step)


class VerifyFixInput(ToolInput):
    investigation_id: str = _iid()
    revert: bool = Field(default=False, description="On failure, undo only this attempt's changes.")
    timeout_s: float | None = Field(default=None, gt=0, le=24 * 3600)
    learned: str | None = None


class VerifyFixOutput(StepOutput):
    passed: bool
    attempt: AttemptView
    strikes: int = Field(description="Failed attempts on the current diagnosis' root cause.")
    escalation: dict[str, Any] | None = None
    three_strike_report: str | None = None

    def body(self) -> str:
        a = self.attempt
        lines = [
            f"Attempt {a.number}: reproducer {'PASSED' if self.passed else 'FAILED'} (exit code {a.exit_code}"
            + (", timed out" if a.timed_out else "")
            + f"); evidence {a.evidence_id}.",
            f"Files changed: {', '.join(a.changed_files) or 'none'}",
        ]
        lines += [f"Warning: {w}" for w in a.warnings]
        if a.reverted:
            lines.append(f"Reverted: {', '.join(a.reverted)}")
        if not self.passed:
            lines.append(f"Strike {self.strikes} of 3.")
        if self.escalation:
            lines.append(f"Escalated to the full protocol: {self.escalation.get('reason')}")
        if a.output_tail:
            lines += ["Output tail:", a.output_tail[-2000:]]
        if self.three_strike_report:
            lines += ["", self.three_strike_report]
        lines.append(f"Next step: {self.next_step}")
        return "\n".join(lines)


def verify_fix(args: VerifyFixInput, call: ToolCall) -> VerifyFixOutput:
    attempt, view = _proto(call).verify_fix(
        args.investigation_id,
        state_dir=state_dir(call.ctx),
        timeout_s=args.timeout_s,
        revert=args.revert,
        learned=args.learned,
        cancel_event=call.cancel_event,
    )
    diag = next((d for d in view.diagnoses if d.id == attempt.diagnosis_id), None)
    return VerifyFixOutput(
        investigation_id=args.investigation_id,
        passed=attempt.status == "passed",
        attempt=attempt,
        strikes=diag.failed_attempts if diag else 0,
        escalation=view.escalation,
        three_strike_report=view.three_strike_report if view.phase == "halted" else None,
        phase=view.phase,
        next_step=view.next_step,
        notices=list(_proto(call).notices),
    )


# ---------------------------------------------------------------------------- knowledge


class ConstraintInput(ToolInput):
    title: str
    rule: str = Field(description="Stated so it can be checked.")
    details: list[str] = Field(default_factory=list)
    category: str | None = None


class CaptureKnowledgeInput(ToolInput):
    investigation_id: str = _iid()
    lessons: list[str] = Field(default_factory=list)
    no_new_knowledge: bool = False
    no_knowledge_reason: str | None = None
    rca_dir: WorkspacePath | None = None
    constraint: ConstraintInput | None = None
    constraints_file: WorkspacePath | None = None
    fix_pattern: bool = False
    abandon: bool = Field(default=False, description="Close unresolved; a person confirms.")
    abandon_reason: str | None = None
    approver: str | None = Field(default=None, description="Abandon without a dialog: who agreed.")
    words: str | None = Field(default=None, description="And their words.")
    fix_patterns_file: WorkspacePath | None = None


class CaptureKnowledgeOutput(StepOutput):
    rca_path: str
    abandoned: dict[str, Any] | None = None
    constraint: dict[str, Any] | None = None
    fix_pattern: dict[str, Any] | None = None
    no_new_knowledge: str | None = None

    def body(self) -> str:
        if self.abandoned:
            return (
                f"Investigation {self.investigation_id} abandoned unresolved ({self.abandoned['reason']}); "
                f"record: {self.rca_path}"
            )
        lines = [f"Investigation {self.investigation_id} closed. Root-cause analysis: {self.rca_path}"]
        if self.constraint:
            lines.append(f"New constraint {self.constraint['number']} in {self.constraint['file']}")
        if self.fix_pattern:
            lines.append(f"New fix pattern {self.fix_pattern['id']} in {self.fix_pattern['file']}")
        if self.no_new_knowledge:
            lines.append(f"No new knowledge: {self.no_new_knowledge}")
        return "\n".join(lines)


class AbandonForm(BaseModel):
    """What the person answers when asked to abandon an unresolved investigation."""

    decision: Literal["abandon", "keep open"] = Field(
        description="Abandon the investigation, or keep it open."
    )
    comment: str = Field(default="", description="Your words.")
    name: str = Field(default="", description="Your name, for the audit trail.")


def _make_abandon_resolver(sctx: ServerContext) -> Any:
    def ask_person_to_abandon(
        investigation_id: str, abandon: bool, abandon_reason: str | None, ctx: Context
    ) -> Elicit[AbandonForm] | _NotAsked:
        if not abandon:
            return _NotAsked(kind="no_elicitation")
        if not (abandon_reason or "").strip():
            return _NotAsked(
                kind="refused", message="abandoning needs a reason", next_step="fill abandon_reason"
            )
        try:
            view = protocol_for(sctx).abandonable(investigation_id)
        except ProtocolError as exc:
            return _NotAsked(kind="refused", message=exc.message, next_step=exc.next_step)
        if not _client_has_form_elicitation(ctx):
            return _NotAsked(kind="no_elicitation")
        return Elicit(
            f"trainsleuth asks whether to abandon investigation {view.id} ({view.symptom}) unresolved, in phase "
            f"{view.phase}.\nReason given: {abandon_reason}\nAbandoning closes it without a verified fix.",
            AbandonForm,
        )

    return ask_person_to_abandon


def _abandon(args: CaptureKnowledgeInput, call: ToolCall, rca_dir: Path) -> CaptureKnowledgeOutput:
    proto = _proto(call)
    outcome = call.resolved.get("abandon_confirmation")
    reason = (args.abandon_reason or "").strip()
    if isinstance(outcome, AcceptedElicitation) and isinstance(outcome.data, AbandonForm):
        form = outcome.data
        if form.decision != "abandon":
            raise proto.refuse(
                args.investigation_id,
                "the person chose to keep the investigation open"
                + (f": {form.comment}" if form.comment else ""),
                "continue the investigation: " + proto.get(args.investigation_id).next_step,
            )
        path, approver, words = (
            "elicitation",
            form.name.strip() or "the person at the client",
            form.comment or None,
        )
    elif isinstance(outcome, (DeclinedElicitation, CancelledElicitation)):
        raise proto.refuse(
            args.investigation_id,
            f"the person did not agree to abandon the investigation ({outcome.action})",
            "continue the investigation",
        )
    else:
        approver, words = _fallback_person(
            call,
            proto,
            args.investigation_id,
            outcome,
            args.approver,
            args.words,
            elicitation_only=(
                "this server accepts a person's decisions only through elicitation, and this client did not "
                "declare elicitation support",
                "abandon from a client that supports elicitation (form mode)",
            ),
            missing=(
                "abandoning an investigation needs the person's agreement: without elicitation, pass who agreed "
                "and their own words",
                "ask the person, then call capture_knowledge with abandon, abandon_reason, approver and words",
            ),
        )
        path = "capture_knowledge"
    result = proto.abandon(
        args.investigation_id, reason=reason, path=path, approver=approver, words=words, rca_dir=rca_dir
    )
    step = _step(call, args.investigation_id)
    return CaptureKnowledgeOutput(
        investigation_id=args.investigation_id,
        rca_path=result["rca_path"],
        abandoned=result["abandoned"],
        **step,
    )


def capture_knowledge(args: CaptureKnowledgeInput, call: ToolCall) -> CaptureKnowledgeOutput:
    proto = _proto(call)
    view = proto.get(args.investigation_id)
    ws = Path(view.workspace)
    rca_dir = Path(args.rca_dir) if args.rca_dir else ws / "docs" / "rca"
    if args.abandon:
        if args.constraint or args.fix_pattern or args.no_new_knowledge:
            raise ProtocolError(
                "abandoning records no knowledge: constraint, fix_pattern and no_new_knowledge do not apply",
                "call capture_knowledge with abandon and abandon_reason only",
            )
        call.ctx.policy.resolve(str(rca_dir), field="rca_dir")
        return _abandon(args, call, rca_dir)
    from trainsleuth.knowledge.constraints import constraints_path, fix_patterns_path

    constraints_file = Path(args.constraints_file) if args.constraints_file else constraints_path(ws)
    patterns_file = Path(args.fix_patterns_file) if args.fix_patterns_file else fix_patterns_path(ws)
    for p in (rca_dir, constraints_file, patterns_file):
        call.ctx.policy.resolve(str(p), field="knowledge path")
    try:
        result = proto.capture_knowledge(
            args.investigation_id,
            lessons=args.lessons,
            no_new_knowledge=args.no_new_knowledge,
            no_knowledge_reason=args.no_knowledge_reason,
            rca_dir=rca_dir,
            constraint=args.constraint.model_dump() if args.constraint else None,
            constraints_file=constraints_file,
            fix_pattern=args.fix_pattern,
            fix_patterns_file=patterns_file,
        )
    except NotImplementedError as exc:
        raise ProtocolError(
            f"this version cannot write knowledge files yet: {exc}",
            "call capture_knowledge without constraint / fix_pattern (the RCA document is still written)",
        ) from exc
    except OSError as exc:
        raise ProtocolError(
            f"cannot write the knowledge files: {exc}", "check the paths and permissions"
        ) from exc
    step = _step(call, args.investigation_id)
    return CaptureKnowledgeOutput(
        investigation_id=args.investigation_id,
        rca_path=result["rca_path"],
        constraint=result.get("constraint"),
        fix_pattern=result.get("fix_pattern"),
        no_new_knowledge=result.get("no_new_knowledge"),
        **step,
    )


# ---------------------------------------------------------------------------- registration


def register(registry: ToolRegistry) -> None:
    add = registry.add
    add(
        "start_investigation",
        start_investigation,
        input_model=StartInvestigationInput,
        output_model=StartInvestigationOutput,
        title="Start an investigation",
        description="Call first: open an investigation of a training problem; returns the next step.",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
    )
    add(
        "get_investigation",
        get_investigation,
        input_model=GetInvestigationInput,
        output_model=GetInvestigationOutput,
        title="Get an investigation",
        description="Any phase: an investigation's evidence, hypotheses, diagnosis, fixes, timeline.",
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
        description="Investigations in this workspace with phase and next step.",
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
        description="Investigating: record something you observed; returns an evidence id.",
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
        description="After investigating: 3-5 ranked hypotheses, tested one at a time.",
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
        description="Mark the hypothesis under test confirmed or ruled out, citing evidence.",
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
        description="Once the cause is found: root cause, evidence, one fix, what would disprove it.",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
    )
    add(
        "record_review",
        record_review,
        input_model=RecordReviewInput,
        output_model=RecordReviewOutput,
        title="Record a critical review",
        description="After a diagnosis: a critical reviewer's verdict (see the critical_review prompt).",
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
        description="Before any fix: a person approves or rejects the diagnosis.",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
        resolved={
            "approval": Annotated[
                ElicitationResult[ApprovalForm], Resolve(_make_approval_resolver(registry.ctx))
            ]
        },
    )
    add(
        "begin_fix",
        begin_fix,
        input_model=BeginFixInput,
        output_model=BeginFixOutput,
        title="Begin a fix attempt",
        description="After approval: start one fix attempt (your files are recorded, not touched).",
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
        description="After the one change: run the reproducer; pass resolves, three fails halt.",
        read_only=False,
        destructive=True,
        idempotent=False,
        open_world=False,
    )
    registry.add(
        "capture_knowledge",
        capture_knowledge,
        resolved={
            "abandon_confirmation": Annotated[
                ElicitationResult[AbandonForm], Resolve(_make_abandon_resolver(registry.ctx))
            ]
        },
        input_model=CaptureKnowledgeInput,
        output_model=CaptureKnowledgeOutput,
        title="Capture knowledge",
        description="Last step: close with a root-cause analysis, constraint and fix pattern.",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
    )


__all__ = ["protocol_for", "register", "render_investigation"]

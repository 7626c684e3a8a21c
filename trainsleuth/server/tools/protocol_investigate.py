"""Protocol tools of phases 1-3: start, get, list, record_evidence, propose and resolve hypotheses."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

from mcp.server.elicitation import AcceptedElicitation, CancelledElicitation, DeclinedElicitation
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import Elicit
from pydantic import BaseModel, Field

from trainsleuth.protocol.ledger import ProtocolError
from trainsleuth.protocol.models import (
    Approval,
    HypothesisOutcome,
    HypothesisSpec,
    HypothesisView,
    InvestigationSummary,
    InvestigationView,
    Pathway,
    Reproducible,
    Suggestion,
)
from trainsleuth.protocol.strikes import normalise
from trainsleuth.server.context import ServerContext
from trainsleuth.server.registry import ToolCall, ToolInput, ToolOutput, WorkspacePath, paginate
from trainsleuth.server.tools.protocol_common import (
    NotAsked,
    StepOutput,
    client_name,
    field_text,
    has_form_elicitation,
    iid,
    log,
    next_step_now,
    person_by_code,
    proto,
    protocol_for,
    step,
)

# ---------------------------------------------------------------------------- start


class StartInvestigationInput(ToolInput):
    symptom: str
    expected: str | None = None
    observed: str | None = None
    started_when: str | None = None
    what_changed: str | None = Field(default=None)
    last_good: str | None = None
    reproducible: Reproducible = "unknown"
    reproducer: str | None = Field(default=None, description="Fails now, passes once fixed.")
    reproducer_timeout_s: float = Field(default=600, ge=1, le=24 * 3600)
    workspace: WorkspacePath | None = None
    pathway: Pathway | None = None
    fresh: bool = False
    code: str | None = None


class StartInvestigationOutput(ToolOutput):
    investigation_id: str
    phase: str
    pathway: Pathway
    pathway_reason: str
    next_step: str
    linked: dict[str, Any] | None = None
    notices: list[str] = Field(default_factory=list)
    suggestions: list[Suggestion] = Field(default_factory=list)
    suggestions_note: str | None = None

    def render_text(self) -> str:
        lines = [f"Notice: {n}" for n in self.notices]
        lines += [
            f"Investigation {self.investigation_id} opened ({self.pathway} pathway: {self.pathway_reason}).",
            "Every analysis tool's result is now recorded on it as evidence (short ids: e1, e2, ...).",
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


class FreshForm(BaseModel):
    """What the person answers when asked to start an investigation fresh."""

    decision: Literal["start fresh", "link"] = Field(
        description="Start fresh (own strikes), or link to the earlier one."
    )
    name: str = Field(default="", description="Your name, for the audit trail.")


def _fresh_target(symptom: str) -> str:
    return "fresh:" + hashlib.sha256(normalise(symptom).encode()).hexdigest()[:16]


def _fresh_text(symptom: str, other: str, why: str) -> str:
    return "\n".join(
        [
            "trainsleuth asks whether a new investigation may start fresh.",
            field_text("New symptom", symptom),
            f"It looks like the unresolved investigation {other}: {why}.",
            "Linked, it shares that problem's failed fix attempts (three halt it). Fresh, it starts at 0.",
        ]
    )


def make_fresh_resolver(sctx: ServerContext) -> Any:
    def ask_person_to_start_fresh(
        symptom: str, reproducer: str | None, fresh: bool, ctx: Context
    ) -> Elicit[FreshForm] | NotAsked:
        if not fresh:
            return NotAsked(kind="not_needed")
        if not has_form_elicitation(ctx):
            return NotAsked(kind="no_elicitation")
        try:
            found = protocol_for(sctx).link_candidate(symptom, reproducer)
        except ProtocolError as exc:
            return NotAsked(kind="refused", message=exc.message, next_step=exc.next_step)
        if found is None:
            return NotAsked(kind="not_needed")
        return Elicit(_fresh_text(symptom, *found), FreshForm)

    return ask_person_to_start_fresh


def _fresh_approval(args: StartInvestigationInput, call: ToolCall) -> Approval | None:
    if not args.fresh:
        return None
    p = proto(call)
    found = p.link_candidate(args.symptom, args.reproducer)
    if found is None:
        return None  # nothing to link to: fresh anyway
    outcome = call.resolved.get("fresh_confirmation")
    if isinstance(outcome, AcceptedElicitation) and isinstance(outcome.data, FreshForm):
        if outcome.data.decision != "start fresh":
            return None
        return Approval(
            path="elicitation",
            decision="approve",
            approver=outcome.data.name.strip() or "the person at the client",
            at=p.clock(),
            client=client_name(call.mcp_ctx),
        )
    if isinstance(outcome, (DeclinedElicitation, CancelledElicitation)):
        return None
    return person_by_code(
        call,
        p,
        purpose="fresh",
        inv_id=found[0],
        target=_fresh_target(args.symptom),
        code=args.code,
        shown=_fresh_text(args.symptom, *found),
        approver=None,
        words=None,
        ask="agree that it starts fresh",
    )


def start_investigation(args: StartInvestigationInput, call: ToolCall) -> StartInvestigationOutput:
    workspace = Path(args.workspace) if args.workspace else call.ctx.workspace
    if not workspace.is_dir():
        raise ProtocolError(
            f"the workspace {workspace} is not a folder", "pass the project folder as workspace"
        )
    fresh = _fresh_approval(args, call)
    text = " ".join(filter(None, [args.symptom, args.expected, args.observed, args.what_changed]))
    suggestions, note = _suggestions(workspace, text)
    p = proto(call)
    view = p.start(
        symptom=args.symptom,
        workspace=workspace,
        expected=args.expected,
        observed=args.observed,
        started_when=args.started_when,
        what_changed=args.what_changed,
        last_good=args.last_good,
        reproducible=args.reproducible,
        reproducer=args.reproducer,
        reproducer_timeout_s=args.reproducer_timeout_s,
        pathway=args.pathway,
        suggestions=suggestions,
        fresh=fresh,
    )
    return StartInvestigationOutput(
        investigation_id=view.id,
        phase=view.phase,
        pathway=view.pathway,
        pathway_reason=view.pathway_reason,
        next_step=view.next_step,
        linked=view.linked,
        notices=list(p.notices),
        suggestions=suggestions,
        suggestions_note=note,
    )


# ---------------------------------------------------------------------------- get / list


class GetInvestigationInput(ToolInput):
    investigation_id: str = iid()
    include_evidence_data: bool = False
    timeline_cursor: str | None = None
    timeline_limit: int = Field(default=100, ge=1, le=500)


class GetInvestigationOutput(ToolOutput):
    investigation: InvestigationView
    timeline_next_cursor: str | None = None

    def render_text(self) -> str:
        return render_investigation(self.investigation)


def _approval_line(a: Approval) -> str:
    who = f" by {a.approver}" if a.approver else ""
    via = a.path.replace("_", " ")
    extra = f", client {a.client}" if a.client else ""
    if a.amended_files:
        return f"  amendment {a.decision}d{who} via {via}{extra}: {', '.join(a.amended_files[:5])}"
    return f"  {a.decision}d{who} via {via}{extra}" + (f': "{a.words[:120]}"' if a.words else "")


def render_investigation(v: InvestigationView) -> str:
    lines = [
        f"# Investigation {v.id}: {v.symptom}",
        f"Phase: {v.phase}; pathway: {v.pathway}"
        + (f" (escalated: {v.escalation['reason']})" if v.escalation else ""),
        f"Next step: {v.next_step}",
        f"Reproducer: {v.reproducer or 'none recorded'}",
        f"Strikes on its problem ({v.problem_id}): {v.strikes} of 3"
        + (f"; linked: {v.linked.get('reason')}" if v.linked else ""),
    ]
    if v.evidence:
        lines.append(f"\nEvidence ({len(v.evidence)}):")
        lines += [f"- {e.id} [{e.source}] {e.summary[:200]}" for e in v.evidence[-30:]]
    if v.hypotheses:
        lines.append("\nHypotheses:")
        lines += [f"- {h.id} r{h.round}#{h.rank} [{h.status}] {h.statement[:160]}" for h in v.hypotheses]
    if v.diagnoses:
        lines.append("\nDiagnoses:")
        for d in v.diagnoses:
            lines.append(f"- {d.id} [{d.status}] conf {d.confidence:.2f}: {d.root_cause[:160]}")
            if d.reproduction is not None:
                r = d.reproduction
                code = "timed out" if r.timed_out else f"exit {r.exit_code}"
                lines.append(f"  reproducer ran on the unfixed tree ({code}): {r.command[:160]}")
            if d.settled_by:
                how = (
                    "bisect + finding"
                    if len(d.settled_by) > 1
                    else "an error found by running the code, localised"
                )
                lines.append(f"  settled by evidence {', '.join(d.settled_by)} ({how})")
            if d.approval:
                lines.append(_approval_line(d.approval))
            lines += [_approval_line(a) for a in d.amendments]
    if v.attempts:
        lines.append("\nFix attempts:")
        lines += [
            f"- {a.id} #{a.number} [{a.status}] exit {a.exit_code}; files: {', '.join(a.changed_files) or '-'}"
            + (f"; warnings: {'; '.join(a.warnings)}" if a.warnings else "")
            for a in v.attempts
        ]
    if v.snapshot_refs:
        lines.append(f"\nGit refs kept for it (removed when it closes): {', '.join(v.snapshot_refs)}")
    if v.three_strike_report:
        lines += ["", v.three_strike_report]
    if v.timeline:
        lines.append("\nTimeline:")
        lines += [f"- {t.at_iso} [{t.kind} -> {t.phase}] {t.summary[:200]}" for t in v.timeline]
    return "\n".join(lines)


def get_investigation(args: GetInvestigationInput, call: ToolCall) -> GetInvestigationOutput:
    view = proto(call).get(args.investigation_id)
    view.next_step = next_step_now(call, view.id, view.next_step)
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
    items = proto(call).list_all(include_closed=args.include_closed)
    page, nxt = paginate(items, args.cursor, args.limit)
    for item in page:
        item.next_step = next_step_now(call, item.id, item.next_step)
    return ListInvestigationsOutput(investigations=page, next_cursor=nxt)


# ---------------------------------------------------------------------------- evidence and hypotheses


class RecordEvidenceInput(ToolInput):
    investigation_id: str = iid()
    summary: str
    data: dict[str, Any] | list[Any] | str | None = Field(
        default=None, description="Numbers, output, file:line."
    )


class RecordEvidenceOutput(StepOutput):
    evidence_id: str

    def body(self) -> str:
        return (
            f"Recorded evidence {self.evidence_id} on {self.investigation_id}.\nNext step: {self.next_step}"
        )


def record_evidence(args: RecordEvidenceInput, call: ToolCall) -> RecordEvidenceOutput:
    ev_id = proto(call).record_evidence(args.investigation_id, args.summary, args.data)
    return RecordEvidenceOutput(
        investigation_id=args.investigation_id, evidence_id=ev_id, **step(call, args.investigation_id)
    )


class ProposeHypothesesInput(ToolInput):
    investigation_id: str = iid()
    hypotheses: list[HypothesisSpec] = Field(min_length=3, max_length=5, description="Most likely first.")


class ProposeHypothesesOutput(StepOutput):
    hypotheses: list[HypothesisView]
    under_test: str

    def body(self) -> str:
        lines = [f"Hypotheses for {self.investigation_id} (one under test at a time):"]
        lines += [f"- {h.id} #{h.rank} [{h.status}] {h.statement}" for h in self.hypotheses]
        lines.append(f"Next step: {self.next_step}")
        return "\n".join(lines)


def propose_hypotheses(args: ProposeHypothesesInput, call: ToolCall) -> ProposeHypothesesOutput:
    hyps = proto(call).propose_hypotheses(args.investigation_id, args.hypotheses)
    under = next(h.id for h in hyps if h.status == "testing")
    return ProposeHypothesesOutput(
        investigation_id=args.investigation_id,
        hypotheses=hyps,
        under_test=under,
        **step(call, args.investigation_id),
    )


class ResolveHypothesisInput(ToolInput):
    investigation_id: str = iid()
    hypothesis_id: str
    outcome: HypothesisOutcome
    evidence_ids: list[str] = Field(min_length=1)
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
    hyp, nxt = proto(call).resolve_hypothesis(
        args.investigation_id, args.hypothesis_id, args.outcome, args.evidence_ids, args.note
    )
    return ResolveHypothesisOutput(
        investigation_id=args.investigation_id,
        hypothesis=hyp,
        now_testing=nxt,
        **step(call, args.investigation_id),
    )

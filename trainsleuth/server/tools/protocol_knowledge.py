"""Protocol tool of phase 6: capture_knowledge (or abandoning, with the person's agreement)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.elicitation import AcceptedElicitation, CancelledElicitation, DeclinedElicitation
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import Elicit
from pydantic import BaseModel, Field

from trainsleuth.protocol.ledger import ProtocolError
from trainsleuth.protocol.models import Approval
from trainsleuth.server.context import ServerContext
from trainsleuth.server.registry import PathArg, ToolCall, ToolInput, WorkspacePath
from trainsleuth.server.tools.protocol_common import (
    NotAsked,
    StepOutput,
    client_name,
    field_text,
    has_form_elicitation,
    iid,
    person_by_code,
    proto,
    protocol_for,
    step,
)


class ConstraintInput(ToolInput):
    title: str
    rule: str
    details: list[str] = Field(default_factory=list)
    category: str | None = None


# The RCA folder: inside the workspace; left out, the RCA goes where it is kept out of the repository.
RcaDir = Annotated[
    str,
    PathArg(
        when_left_out="the RCA then goes to the workspace's RCA folder setting, else .trainsleuth/rca/ (git-ignored, "
        "so the repository stays as it was)"
    ),
]


class CaptureKnowledgeInput(ToolInput):
    investigation_id: str = iid()
    lessons: list[str] = Field(default_factory=list)
    no_new_knowledge: bool = False
    no_knowledge_reason: str | None = Field(default=None, description="Required when no_new_knowledge.")
    rca_dir: RcaDir | None = None
    constraint: ConstraintInput | None = None
    constraints_file: WorkspacePath | None = None
    fix_pattern: bool = False
    abandon: bool = Field(default=False, description="Close unresolved; a person confirms.")
    abandon_reason: str | None = Field(default=None, description="Required when abandon.")
    code: str | None = None
    approver: str | None = None
    words: str | None = None
    fix_patterns_file: WorkspacePath | None = None


class CaptureKnowledgeOutput(StepOutput):
    rca_path: str
    abandoned: dict[str, Any] | None = None
    constraint: dict[str, Any] | None = None
    fix_pattern: dict[str, Any] | None = None
    no_new_knowledge: str | None = None
    removed_refs: list[str] = Field(default_factory=list)

    def body(self) -> str:
        if self.abandoned:
            return (
                f"Investigation {self.investigation_id} abandoned unresolved ({self.abandoned['reason']}); "
                f"record: {self.rca_path}"
            )
        lines = [f"Investigation {self.investigation_id} closed. Root-cause analysis: {self.rca_path}"]
        if "/.trainsleuth/" in self.rca_path.replace("\\", "/"):
            lines.append(
                f"(kept out of the repository; to keep it there: mkdir -p docs/rca && cp '{self.rca_path}' docs/rca/, "
                "or pass rca_dir: docs/rca next time)"
            )
        if self.constraint:
            lines.append(f"New constraint {self.constraint['number']} in {self.constraint['file']}")
        if self.fix_pattern:
            lines.append(f"New fix pattern {self.fix_pattern['id']} in {self.fix_pattern['file']}")
        if self.no_new_knowledge:
            lines.append(f"No new knowledge: {self.no_new_knowledge}")
        if self.removed_refs:
            lines.append(f"Removed {len(self.removed_refs)} snapshot ref(s) under refs/trainsleuth/.")
        return "\n".join(lines)


class AbandonForm(BaseModel):
    """What the person answers when asked to abandon an unresolved investigation."""

    decision: Literal["abandon", "keep open"] = Field(
        description="Abandon the investigation, or keep it open."
    )
    comment: str = Field(default="", description="Your words.")
    name: str = Field(default="", description="Your name, for the audit trail.")


def _abandon_text(inv_id: str, symptom: str, phase: str, reason: str) -> str:
    return "\n".join(
        [
            f"trainsleuth asks whether to abandon investigation {inv_id} unresolved, in phase {phase}.",
            field_text("Symptom", symptom),
            field_text("Reason given", reason),
            "Abandoning closes it without a verified fix and reopens the edit gate.",
        ]
    )


def make_abandon_resolver(sctx: ServerContext) -> Any:
    def ask_person_to_abandon(
        investigation_id: str, abandon: bool, abandon_reason: str | None, ctx: Context
    ) -> Elicit[AbandonForm] | NotAsked:
        if not abandon:
            return NotAsked(kind="not_needed")
        if not (abandon_reason or "").strip():
            return NotAsked(
                kind="refused", message="abandoning needs a reason", next_step="fill abandon_reason"
            )
        if not has_form_elicitation(ctx):
            return NotAsked(kind="no_elicitation")
        try:
            view = protocol_for(sctx).abandonable(investigation_id)
        except ProtocolError as exc:
            return NotAsked(kind="refused", message=exc.message, next_step=exc.next_step)
        return Elicit(_abandon_text(view.id, view.symptom, view.phase, abandon_reason or ""), AbandonForm)

    return ask_person_to_abandon


def _abandon(args: CaptureKnowledgeInput, call: ToolCall, rca_dir: Path) -> CaptureKnowledgeOutput:
    p = proto(call)
    outcome = call.resolved.get("abandon_confirmation")
    asked = outcome.data if isinstance(outcome, AcceptedElicitation) else None
    if isinstance(asked, NotAsked) and asked.kind == "refused":
        raise ProtocolError(asked.message, asked.next_step)
    reason = (args.abandon_reason or "").strip()
    if not reason:
        raise ProtocolError("abandoning needs a reason", "fill abandon_reason")
    view = p.abandonable(args.investigation_id)
    if isinstance(asked, AbandonForm):
        if asked.decision != "abandon":
            raise p.refuse(
                args.investigation_id,
                "the person chose to keep the investigation open"
                + (f": {asked.comment}" if asked.comment else ""),
                "continue the investigation: " + view.next_step,
            )
        approval = Approval(
            path="elicitation",
            decision="approve",
            approver=asked.name.strip() or "the person at the client",
            words=asked.comment or None,
            at=p.clock(),
            client=client_name(call.mcp_ctx),
        )
    elif isinstance(outcome, (DeclinedElicitation, CancelledElicitation)):
        raise p.refuse(
            args.investigation_id,
            f"the person did not agree to abandon the investigation ({outcome.action})",
            "continue the investigation",
        )
    else:
        approval = person_by_code(
            call,
            p,
            purpose="abandon",
            inv_id=args.investigation_id,
            target=args.investigation_id,
            code=args.code,
            shown=_abandon_text(view.id, view.symptom, view.phase, reason),
            approver=args.approver,
            words=args.words,
            ask="agree to abandon it",
        )
    result = p.abandon(args.investigation_id, reason=reason, approval=approval, rca_dir=rca_dir)
    return CaptureKnowledgeOutput(
        investigation_id=args.investigation_id,
        rca_path=result["rca_path"],
        abandoned=result["abandoned"],
        removed_refs=result.get("removed_refs") or [],
        **step(call, args.investigation_id),
    )


def capture_knowledge(args: CaptureKnowledgeInput, call: ToolCall) -> CaptureKnowledgeOutput:
    p = proto(call)
    view = p.get(args.investigation_id)
    ws = Path(view.workspace)
    rca_dir = p.rca_dir(ws, Path(args.rca_dir) if args.rca_dir else None)
    if args.abandon:
        if args.constraint or args.fix_pattern or args.no_new_knowledge:
            raise ProtocolError(
                "abandoning records no knowledge: constraint, fix_pattern and no_new_knowledge do not apply",
                "call capture_knowledge with abandon and abandon_reason only",
            )
        return _abandon(args, call, rca_dir)
    from trainsleuth.knowledge.constraints import constraints_path, fix_patterns_path

    constraints_file = Path(args.constraints_file) if args.constraints_file else constraints_path(ws)
    patterns_file = Path(args.fix_patterns_file) if args.fix_patterns_file else fix_patterns_path(ws)
    for path in (constraints_file, patterns_file):
        call.ctx.policy.resolve(str(path), field="knowledge path")
    try:
        result = p.capture_knowledge(
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
    except OSError as exc:
        raise ProtocolError(
            f"cannot write the knowledge files: {exc}", "check the paths and permissions"
        ) from exc
    return CaptureKnowledgeOutput(
        investigation_id=args.investigation_id,
        rca_path=result["rca_path"],
        constraint=result.get("constraint"),
        fix_pattern=result.get("fix_pattern"),
        no_new_knowledge=result.get("no_new_knowledge"),
        removed_refs=result.get("removed_refs") or [],
        **step(call, args.investigation_id),
    )

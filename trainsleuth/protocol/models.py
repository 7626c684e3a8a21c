"""Records of the investigation state machine (pydantic; no MCP imports)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Pathway = Literal["quick", "full"]
Reproducible = Literal["always", "intermittent", "no", "unknown"]
Verdict = Literal["CONFIRMED", "CHALLENGED", "INSUFFICIENT_EVIDENCE"]
HypothesisOutcome = Literal["confirmed", "ruled_out"]


class Suggestion(BaseModel):
    kind: str
    id: str
    title: str
    pointer: str | None = None
    score: float | None = None


class EvidenceItem(BaseModel):
    id: str
    source: str = Field(description="The tool that produced it, or 'assistant' for record_evidence.")
    summary: str
    created_at: float
    data: Any = None


class TimelineEvent(BaseModel):
    seq: int
    at: float
    at_iso: str
    kind: str
    phase: str = Field(description="The phase after this event.")
    summary: str
    data: dict[str, Any] = Field(default_factory=dict)


class HypothesisSpec(BaseModel):
    statement: str
    confirm_if: str
    rule_out_if: str
    test: str | None = Field(default=None, description="Tool call or command.")


class HypothesisView(HypothesisSpec):
    id: str
    round: int
    rank: int
    status: Literal["pending", "testing", "confirmed", "ruled_out", "superseded"]
    evidence_ids: list[str] = Field(default_factory=list)
    note: str | None = None


class ProposedFix(BaseModel):
    files: list[str] = Field(
        default_factory=list, description="Files the fix will change (relative to the workspace)."
    )
    change: str = Field(description="The one change, described precisely.")


class Reproduction(BaseModel):
    """The server's own run of the reproducer on the unfixed tree, and what it could reach then."""

    command: str
    exit_code: int | None = None
    timed_out: bool = False
    output_tail: str = ""
    at: float
    evidence_id: str | None = None
    interpreters: list[str] = Field(default_factory=list)
    outputs: list[str] = Field(
        default_factory=list, description="Logs and plots the run wrote itself (not counted as changes)."
    )


class DiagnosisSpec(BaseModel):
    symptom: str
    root_cause: str
    evidence_ids: list[str] = Field(
        default_factory=list, description="Evidence ids (from this investigation) supporting the root cause."
    )
    mechanism: str = Field(description="Why the root cause produces the symptom.")
    proposed_fix: ProposedFix
    side_effects: str = ""
    will_not_fix: str = Field(default="", description="What this fix will not fix.")
    confidence: float = Field(ge=0.0, le=1.0)
    alternatives_considered: list[str] = Field(default_factory=list)
    disproving_observation: str = Field(
        default="", description="The observation that would disprove this root cause."
    )
    disproof_looked_for: bool = Field(default=False, description="Whether that observation was looked for.")
    disproof_result: str | None = Field(default=None, description="What looking for it showed.")
    hypothesis_id: str | None = Field(
        default=None, description="The confirmed hypothesis this rests on (full pathway; default: latest)."
    )
    reproducer: str | None = Field(
        default=None,
        description="Shell command that fails now and passes once fixed (default: the investigation's).",
    )
    reproducer_timeout_s: float | None = None


ApprovalPath = Literal["elicitation", "terminal", "one_time_code", "approve_diagnosis", "capture_knowledge"]


class Approval(BaseModel):
    path: ApprovalPath = Field(
        description="How the person decided: elicitation (the client's dialog), terminal (`trainsleuth "
        "approve` in their own terminal), one_time_code (a code the server showed on a private channel), or "
        "approve_diagnosis (an unverified record from an older trainsleuth, or a rejection, which needs no proof)."
    )
    decision: Literal["approve", "reject"]
    approver: str | None = None
    words: str | None = None
    at: float
    client: str | None = Field(default=None, description="The MCP client that carried the decision.")
    channel: str | None = Field(default=None, description="Where the one-time code was shown.")
    amended_files: list[str] = Field(
        default_factory=list, description="Files added to the approved fix by this approval (an amendment)."
    )


class ReviewView(BaseModel):
    id: str
    diagnosis_id: str
    verdict: Verdict
    reviewer: str
    reasoning: str
    alternative_explanations: list[str] = Field(default_factory=list)
    missing_evidence: list[str] = Field(default_factory=list)
    created_at: float


class DiagnosisView(DiagnosisSpec):
    id: str
    status: Literal[
        "awaiting_review",
        "awaiting_approval",
        "approved",
        "rejected",
        "sent_back",
        "superseded",
        "withdrawn",
        "struck_out",
        "resolved",
    ]
    created_at: float
    approval: Approval | None = None
    amendments: list[Approval] = Field(default_factory=list)
    reviews: list[ReviewView] = Field(default_factory=list)
    reproduction: Reproduction | None = None
    settled_by: list[str] = Field(
        default_factory=list,
        description="Evidence that settled the question without hypotheses (bisect + finding, or a localised "
        "error found by running the code).",
    )
    disproof_from: str | None = Field(
        default=None,
        description="The confirmed hypothesis whose rule_out_if is the disproving observation (none was given).",
    )
    failed_attempts: int = Field(
        default=0,
        description="Failed fix attempts on this problem since its last halt (strikes; three halt it).",
    )


class AttemptView(BaseModel):
    id: str
    diagnosis_id: str
    number: int = Field(description="Attempt number on this diagnosis (1-3).")
    description: str
    status: Literal["active", "passed", "failed"]
    created_at: float
    finished_at: float | None = None
    base_head: str | None = None
    snapshot_ref: str | None = None
    was_dirty: bool = False
    changed_files: list[str] = Field(default_factory=list)
    diff: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    output_tail: str | None = None
    evidence_id: str | None = None
    warnings: list[str] = Field(default_factory=list)
    reverted: list[str] = Field(default_factory=list)
    learned: str | None = None
    unapproved: list[str] = Field(
        default_factory=list,
        description="What changed that the approved fix does not name (needs undoing or a new approval).",
    )
    repeats: str | None = Field(default=None, description="A failed attempt whose diff this attempt repeats.")


class InvestigationSummary(BaseModel):
    id: str
    symptom: str
    phase: str
    pathway: Pathway
    workspace: str
    created_at: float
    updated_at: float
    next_step: str


class InvestigationView(InvestigationSummary):
    expected: str | None = None
    observed: str | None = None
    started_when: str | None = None
    what_changed: str | None = None
    last_good: str | None = None
    reproducible: Reproducible = "unknown"
    reproducer: str | None = None
    reproducer_timeout_s: float = 600
    pathway_reason: str = ""
    escalation: dict[str, Any] | None = None
    suggestions: list[Suggestion] = Field(default_factory=list)
    current_diagnosis_id: str | None = None
    evidence: list[EvidenceItem] = Field(default_factory=list)
    hypotheses: list[HypothesisView] = Field(default_factory=list)
    diagnoses: list[DiagnosisView] = Field(default_factory=list)
    attempts: list[AttemptView] = Field(default_factory=list)
    three_strike_report: str | None = None
    problem_id: str | None = Field(
        default=None, description="The problem this investigation's strikes count on."
    )
    linked: dict[str, Any] | None = Field(
        default=None, description="Why it was linked to an earlier investigation of the same problem."
    )
    strikes: int = Field(default=0, description="Failed fix attempts on the problem since its last halt.")
    snapshot_refs: list[str] = Field(
        default_factory=list, description="Git refs trainsleuth still keeps for it (removed when it closes)."
    )
    knowledge: dict[str, Any] | None = None
    timeline: list[TimelineEvent] = Field(default_factory=list)

"""Protocol tools of phase 5: begin_fix and verify_fix (the server runs the approved reproducer)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trainsleuth.protocol.models import AttemptView
from trainsleuth.server.registry import ToolCall, ToolInput
from trainsleuth.server.tools.protocol_common import (
    StepOutput,
    has_form_elicitation,
    iid,
    proto,
    restate_step,
    step,
)


class BeginFixInput(ToolInput):
    investigation_id: str = iid()
    description: str


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
    attempt = proto(call).begin_fix(args.investigation_id, args.description)
    return BeginFixOutput(
        investigation_id=args.investigation_id, attempt=attempt, **step(call, args.investigation_id)
    )


class VerifyFixInput(ToolInput):
    investigation_id: str = iid()
    revert: bool = Field(default=False, description="Undo this attempt if it fails.")
    timeout_s: float | None = Field(default=None, ge=1, le=24 * 3600)
    learned: str | None = None


class VerifyFixOutput(StepOutput):
    passed: bool
    attempt: AttemptView
    strikes: int = Field(description="Failed attempts on this problem since its last halt.")
    escalation: dict[str, Any] | None = None
    three_strike_report: str | None = None

    def body(self) -> str:
        a = self.attempt
        verdict = "PASSED" if a.exit_code == 0 and not a.timed_out else "FAILED"
        lines = [
            f"Attempt {a.number}: reproducer {verdict} (exit code {a.exit_code}"
            + (", timed out" if a.timed_out else "")
            + f"); evidence {a.evidence_id}."
            + ("" if self.passed or verdict == "FAILED" else " NOT RESOLVED: see the warning below."),
            f"Files changed: {', '.join(a.changed_files) or 'none'}",
        ]
        lines += [f"Warning: {w}" for w in a.warnings]
        if a.reverted:
            lines.append(f"Reverted: {', '.join(a.reverted)}")
        if not self.passed and a.status == "failed":
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
    p = proto(call)
    call.progress(0, None, "running the approved reproducer")
    attempt, view = p.verify_fix(
        args.investigation_id,
        timeout_s=args.timeout_s,
        revert=args.revert,
        learned=args.learned,
        cancel_event=call.cancel_event,
    )
    return VerifyFixOutput(
        investigation_id=args.investigation_id,
        passed=attempt.status == "passed",
        attempt=attempt,
        strikes=view.strikes,
        escalation=view.escalation,
        three_strike_report=view.three_strike_report if view.phase == "halted" else None,
        phase=view.phase,
        next_step=view.next_step,
        notices=list(p.notices),
    )


def finish_verify(out: VerifyFixOutput, args: VerifyFixInput, call: ToolCall) -> VerifyFixOutput:
    """In the server that delivers the result: a pass with changes outside the approved fix is shown to
    the person with a code at once (clients without dialogs), and the next step is the one that holds now."""
    p = proto(call)
    if out.attempt.unapproved and not has_form_elicitation(call.mcp_ctx):
        from trainsleuth.protocol.ledger import ProtocolError
        from trainsleuth.server.tools.protocol_diagnosis import _offer_amendment_code

        try:
            out.notices.append(_offer_amendment_code(call, p, args.investigation_id))
        except ProtocolError:
            pass
    return restate_step(out, call, args.investigation_id)

"""Phase 4 (Gate 4), second half: the critical review and the person's decision.

Rules:
- confidence < 0.8 needs a CONFIRMED critical review before the person is asked;
- the person approves (or rejects) the diagnosis as tested: if anything changed since the reproducer
  ran, approval is refused until the diagnosis is submitted again; approving a new root cause on a
  halted problem starts a new epoch of strikes;
- during a fix, the person may approve an amendment: files the attempt changed beyond the fix.

The diagnosis itself and its reproducer run are in `diagnose.py`.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainsleuth.protocol import strikes
from trainsleuth.protocol.core import (
    APPROVED,
    DIAGNOSIS,
    FIXING,
    HYPOTHESES,
    ProtocolCore,
)
from trainsleuth.protocol.ledger import ProtocolError, dumps, short_id
from trainsleuth.protocol.models import Approval, DiagnosisView, ReviewView, Verdict


@dataclass
class ApprovalRequest:
    """What the person is asked to decide: a diagnosis, or an amendment of the approved fix."""

    kind: str  # "diagnosis" or "amendment"
    diagnosis: DiagnosisView
    files: list[str] = field(default_factory=list)  # amendment: what to add to the fix
    diff: str = ""  # amendment: the attempt's diff so far


class DiagnosisDecision(ProtocolCore):
    """Review a submitted diagnosis and record the person's decision on it."""

    # ------------------------------------------------------------------ review

    def record_review(
        self,
        inv_id: str,
        verdict: Verdict,
        reviewer: str,
        reasoning: str,
        alternative_explanations: list[str],
        missing_evidence: list[str],
        diagnosis_id: str | None = None,
    ) -> tuple[ReviewView, DiagnosisView]:
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            self._escalate_if_due(conn, inv)
            diag = self._current_diagnosis(conn, inv)
            if diag is None or inv["phase"] != DIAGNOSIS:
                raise self.refuse(
                    inv_id, "there is no submitted diagnosis awaiting review", "submit_diagnosis first"
                )
            if diagnosis_id and diagnosis_id != diag["id"]:
                raise ProtocolError(
                    f"diagnosis {diagnosis_id} is not the current diagnosis ({diag['id']})",
                    "review the current diagnosis (get_investigation shows it)",
                )
            if not reviewer.strip() or not reasoning.strip():
                raise ProtocolError(
                    "a review needs the reviewer and its reasoning", "fill reviewer and reasoning"
                )
            rev_id = short_id(conn, "r")
            data = {
                "reviewer": reviewer,
                "reasoning": reasoning,
                "alternative_explanations": alternative_explanations,
                "missing_evidence": missing_evidence,
            }
            conn.execute(
                "INSERT INTO reviews(id, investigation_id, diagnosis_id, created_at, verdict, data) VALUES(?,?,?,?,?,?)",
                (rev_id, inv_id, diag["id"], self.clock(), verdict, dumps(data)),
            )
            if verdict == "CONFIRMED":
                self._set_diag_status(conn, diag["id"], "awaiting_approval")
                summary = f"review {rev_id} by {reviewer}: CONFIRMED diagnosis {diag['id']}"
            else:
                self._set_diag_status(conn, diag["id"], "sent_back")
                inv["data"]["current_diagnosis_id"] = None
                inv["phase"] = HYPOTHESES
                summary = f"review {rev_id} by {reviewer}: {verdict}; diagnosis {diag['id']} sent back to hypotheses"
            self._event(
                conn,
                inv_id,
                "review_recorded",
                inv["phase"],
                summary,
                {"review_id": rev_id, "verdict": verdict},
            )
            self._save(conn, inv)
            view = self._diagnosis_view(conn, self._diagnosis(conn, diag["id"]))
            return next(r for r in view.reviews if r.id == rev_id), view

    # ------------------------------------------------------------------ approval

    def approval_request(
        self, inv_id: str, diagnosis_id: str | None = None, *, check_tree: bool = True
    ) -> ApprovalRequest:
        """What approval would decide now; refuses when nothing can be approved yet."""
        with self._read() as conn:
            inv = self._inv_row(conn, inv_id)
            diag = self._current_diagnosis(conn, inv)
            if inv["phase"] == FIXING and diag is not None:
                adata = self._active_attempt_data(conn, inv)
                if adata.get("unapproved"):
                    return ApprovalRequest(
                        "amendment",
                        self._diagnosis_view(conn, diag),
                        list(adata["unapproved"]),
                        adata.get("diff") or "",
                    )
            if diag is None or inv["phase"] != DIAGNOSIS:
                raise self.refuse(
                    inv_id,
                    f"there is no diagnosis awaiting approval (phase: {inv['phase']})",
                    "the diagnosis is already approved: begin_fix"
                    if inv["phase"] == APPROVED
                    else "the diagnosis is approved and a fix attempt is active: make the one change, then verify_fix"
                    if inv["phase"] == FIXING
                    else "submit_diagnosis first (Gate 4)",
                )
            if diagnosis_id and diagnosis_id != diag["id"]:
                raise ProtocolError(
                    f"diagnosis {diagnosis_id} is not the current diagnosis ({diag['id']})",
                    "approve the current diagnosis (get_investigation shows it)",
                )
            if diag["status"] == "awaiting_review":
                raise self.refuse(
                    inv_id,
                    f"diagnosis {diag['id']} has confidence {diag['confidence']:.2f} < 0.8 and cannot be approved "
                    "until a critical review verdict of CONFIRMED is recorded",
                    "run a critical review (the critical_review prompt) and record_review with its verdict",
                )
            view = self._diagnosis_view(conn, diag)
            workspace = Path(inv["workspace"])
        if view.reproduction is None or not diag["data"].get("fingerprint"):
            raise self.refuse(
                inv_id,
                f"diagnosis {diag['id']} was submitted without the server running its reproducer (an older "
                "trainsleuth)",
                "submit_diagnosis again (the server runs the reproducer on the unfixed tree)",
            )
        if check_tree:
            changed = self.changed_since_reproduction(diag["data"], workspace)
            if changed:
                raise self.refuse(
                    inv_id,
                    "the workspace changed since the server ran the reproducer for this diagnosis: "
                    + ", ".join(changed[:10]),
                    "submit_diagnosis again, so the person approves the tree the reproducer was tested on",
                )
        return ApprovalRequest("diagnosis", view)

    def decide(self, inv_id: str, request: ApprovalRequest, approval: Approval) -> DiagnosisView:
        """Record the person's decision on what `approval_request` returned."""
        diag_id = request.diagnosis.id
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            diag = self._diagnosis(conn, diag_id)
            if request.kind == "amendment":
                return self._decide_amendment(conn, inv, diag, request, approval)
            if inv["phase"] != DIAGNOSIS or inv["data"].get("current_diagnosis_id") != diag_id:
                raise ProtocolError(
                    "the investigation changed while the person decided", "call get_investigation"
                )
            record = approval.model_dump()
            if approval.decision == "approve":
                self._set_diag_status(conn, diag_id, "approved", approval=record)
                inv["phase"] = APPROVED
                summary = (
                    f"diagnosis {diag_id} approved by {approval.approver or 'the person'} via {approval.path}"
                )
                kind = "diagnosis_approved"
                problem = strikes.ensure_problem(conn, inv["data"]["problem_id"], inv["created_at"])
                if problem["halted"]:
                    problem["halted"] = 0
                    problem["epoch"] += 1
                    strikes.save_problem(conn, problem)
                    inv["data"]["three_strike_report"] = None
                    summary += f"; a different root cause on the halted problem: strikes start again (epoch {problem['epoch']})"
            else:
                self._set_diag_status(conn, diag_id, "rejected", approval=record)
                inv["data"]["current_diagnosis_id"] = None
                inv["phase"] = HYPOTHESES
                summary = (
                    f"diagnosis {diag_id} rejected by {approval.approver or 'the person'} via {approval.path}"
                    + (f": {approval.words}" if approval.words else "")
                )
                kind = "diagnosis_rejected"
            self._event(conn, inv_id, kind, inv["phase"], summary[:500], record)
            self._save(conn, inv)
            view = self._diagnosis_view(conn, self._diagnosis(conn, diag_id))
        if approval.decision == "approve":
            # The first fix attempt begins with the approval (the tree is the one the person approved), so the
            # assistant goes straight to its one change and verify_fix; begin_fix stays for later attempts.
            self._after_approval(inv_id, str(diag["data"]["proposed_fix"]["change"]))
        return view

    def _decide_amendment(
        self,
        conn: sqlite3.Connection,
        inv: dict[str, Any],
        diag: dict[str, Any],
        request: ApprovalRequest,
        approval: Approval,
    ) -> DiagnosisView:
        attempt_id = inv["data"].get("active_attempt_id")
        adata = self._active_attempt_data(conn, inv)
        if inv["phase"] != FIXING or sorted(adata.get("unapproved") or []) != sorted(request.files):
            raise ProtocolError("the fix attempt changed while the person decided", "call verify_fix again")
        record = {**approval.model_dump(), "amended_files": list(request.files)}
        if approval.decision == "approve":
            diag["data"]["proposed_fix"]["files"] = list(diag["data"]["proposed_fix"]["files"]) + list(
                request.files
            )
            diag["data"].setdefault("amendments", []).append(record)
            conn.execute("UPDATE diagnoses SET data=? WHERE id=?", (dumps(diag["data"]), diag["id"]))
            adata["unapproved"] = []
            conn.execute("UPDATE fix_attempts SET data=? WHERE id=?", (dumps(adata), attempt_id))
            summary = (
                f"the fix of {diag['id']} now also covers {', '.join(request.files[:10])}: approved by "
                f"{approval.approver or 'the person'} via {approval.path}"
            )
            kind = "amendment_approved"
        else:
            summary = (
                f"{approval.approver or 'the person'} did not approve changing {', '.join(request.files[:10])} "
                f"via {approval.path}" + (f": {approval.words}" if approval.words else "")
            )
            kind = "amendment_rejected"
        self._event(conn, inv["id"], kind, inv["phase"], summary[:500], record)
        self._save(conn, inv)
        return self._diagnosis_view(conn, self._diagnosis(conn, diag["id"]))

    def record_cancelled_approval(self, inv_id: str, diagnosis_id: str, detail: str) -> None:
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            self._event(
                conn, inv_id, "approval_cancelled", inv["phase"], f"approval of {diagnosis_id}: {detail}",
                {"diagnosis_id": diagnosis_id},
            )  # fmt: skip


__all__ = ["ApprovalRequest", "DiagnosisDecision"]

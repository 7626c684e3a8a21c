"""What to do now: every next step the state can give, and which one it gives.

Each entry of NEXT_STEPS names a step that its gate accepts in the state that gives it: the next step and
the gates never disagree (`tests/test_protocol_next_steps.py` reaches every key and takes its step). A
step is derived from the state only, so it never asks for something already done.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from trainsleuth.protocol import gate
from trainsleuth.protocol.gate4 import SETTLING_HINT

NEXT_STEPS: dict[str, str] = {
    "investigate_quick": "gather evidence for the obvious cause (analysis tools record their results on this "
    "investigation), then submit_diagnosis with the fix's files and the reproducer",
    "investigate_full": "investigate and compare with what works (analysis tools record their results here), "
    "then propose_hypotheses (3-5, ranked); or go straight to submit_diagnosis and " + SETTLING_HINT,
    "resubmit": "the last diagnosis was {why}: gather what it lacked, then submit_diagnosis again or "
    "propose_hypotheses for a new round",
    "resubmit_or_hypotheses": "the last diagnosis was {why}: propose_hypotheses for a new round, or gather what "
    "it lacked and submit_diagnosis again: on the full pathway it must " + SETTLING_HINT,
    "submit_confirmed": "submit_diagnosis resting on the confirmed hypothesis {id} ({statement}); its "
    "rule_out_if is the disproving observation unless you give another",
    "test_hypothesis": "test hypothesis {id} ({statement}) and resolve_hypothesis citing evidence ids",
    "new_round": "every hypothesis of the round is ruled out: propose_hypotheses for a new round",
    "review": "confidence is below 0.8: get a critical review (the critical_review prompt) and record_review; "
    "CONFIRMED allows approval",
    "approve": "approve_diagnosis: the person approves or rejects the diagnosis before any fix",
    "begin_fix": "begin_fix, make the one change the diagnosis proposes, then verify_fix",
    "hypotheses_before_fix": "the failed fix escalated the investigation to the full protocol: propose_hypotheses "
    "(3-5, ranked) before the next begin_fix",
    "undo_or_amend": "{files} changed but the approved fix does not name it: undo that change and verify_fix "
    "again, or approve_diagnosis to ask the person to approve it",
    "fix": "make the one change the diagnosis proposes, then verify_fix (the server runs the reproducer)",
    "halted": "three fix attempts failed: read the three-strike report, re-examine the assumptions, "
    "propose_hypotheses again and submit_diagnosis with a different root cause",
    "capture": "capture_knowledge: write the root-cause analysis (and any new constraint or fix pattern)",
    "closed": "nothing: the investigation is closed",
}


def _step(key: str, **values: str) -> tuple[str, str]:
    return key, NEXT_STEPS[key].format(**values)


def next_move(
    conn: sqlite3.Connection,
    inv: dict[str, Any],
    diagnosis: dict[str, Any] | None,
    attempt: dict[str, Any],
) -> tuple[str, str]:
    """(key in NEXT_STEPS, text) for investigation `inv`, its current diagnosis and active attempt's record."""
    phase = inv["phase"]
    if phase == gate.PHASE_INVESTIGATING:
        return _step("investigate_quick" if inv["pathway"] == "quick" else "investigate_full")
    if phase == gate.PHASE_HYPOTHESES:
        return _hypotheses_step(conn, inv)
    if phase == gate.PHASE_DIAGNOSIS:
        awaiting_review = diagnosis is not None and diagnosis["status"] == "awaiting_review"
        return _step("review" if awaiting_review else "approve")
    if phase == gate.PHASE_APPROVED:
        return _step("hypotheses_before_fix" if fix_needs_hypotheses(conn, inv, diagnosis) else "begin_fix")
    if phase == gate.PHASE_FIXING:
        pending = attempt.get("unapproved")
        return _step("undo_or_amend", files=", ".join(pending[:5])) if pending else _step("fix")
    if phase == gate.PHASE_HALTED:
        return _step("halted")
    if phase == gate.PHASE_RESOLVED:
        return _step("capture")
    return _step("closed")


def fix_needs_hypotheses(
    conn: sqlite3.Connection, inv: dict[str, Any], diagnosis: dict[str, Any] | None
) -> bool:
    """begin_fix's rule on the full pathway: a diagnosis not settled by evidence needs ranked hypotheses
    (the quick pathway's diagnosis after its fix failed and escalated the investigation)."""
    if inv["pathway"] != "full" or diagnosis is None or diagnosis["data"].get("settled_by"):
        return False
    row = conn.execute(
        "SELECT COUNT(*) AS n FROM hypotheses WHERE investigation_id=?", (inv["id"],)
    ).fetchone()
    return not row["n"]


def _hypotheses_step(conn: sqlite3.Connection, inv: dict[str, Any]) -> tuple[str, str]:
    rows = conn.execute(
        "SELECT id, status, data, created_at FROM hypotheses WHERE investigation_id=? ORDER BY round DESC, rank",
        (inv["id"],),
    ).fetchall()
    latest = conn.execute(
        "SELECT status, created_at FROM diagnoses WHERE investigation_id=? ORDER BY created_at DESC LIMIT 1",
        (inv["id"],),
    ).fetchone()
    testing = next((r for r in rows if r["status"] == "testing"), None)
    confirmed = next((r for r in rows if r["status"] == "confirmed"), None)
    sent_back = latest is not None and latest["status"] in ("sent_back", "rejected")

    def newer(row: Any) -> bool:  # a hypothesis proposed after that diagnosis: a new round is under way
        return row is not None and latest is not None and row["created_at"] > latest["created_at"]

    if sent_back and not newer(confirmed) and not newer(testing):
        why = "sent back by the review" if latest["status"] == "sent_back" else "rejected by the person"
        if inv["pathway"] == "full" and confirmed is None:
            # (Never after a failed fix: a diagnosis submitted since rests on a confirmed hypothesis.)
            return _step("resubmit_or_hypotheses", why=why)
        return _step("resubmit", why=why)
    if confirmed is not None and testing is None:
        statement = json.loads(confirmed["data"]).get("statement", "")[:100]
        return _step("submit_confirmed", id=confirmed["id"], statement=statement)
    if testing is not None:
        statement = json.loads(testing["data"]).get("statement", "")[:100]
        return _step("test_hypothesis", id=testing["id"], statement=statement)
    return _step("new_round")


__all__ = ["NEXT_STEPS", "fix_needs_hypotheses", "next_move"]

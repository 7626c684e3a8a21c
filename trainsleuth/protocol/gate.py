"""The edit gate: may the assistant edit files in this workspace right now?

Used by the edit-gate hooks (`trainsleuth hook CLIENT`) before every file edit. It reads the
protocol's SQLite state **without writing**: the database is opened read-only, and a workspace
without a database has no investigation, so edits are allowed.

Rules (the protocol's guarantee 1, applied to raw edits):
- no open investigation in the workspace: allowed;
- an investigation is open without an approved diagnosis (still investigating, hypotheses,
  diagnosis awaiting review or approval): refused, next step names the missing protocol step;
- an approved diagnosis but no fix attempt begun: refused until `begin_fix` records the repo state;
- an approved diagnosis with an active fix attempt: allowed;
- halted after three failed attempts: refused until a new diagnosis is approved;
- resolved, closed or abandoned investigations never block.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from trainsleuth.protocol.store import default_state_path

# Phases, as stored in investigations.phase (protocol/ledger.py owns the writes).
PHASE_INVESTIGATING = "investigating"
PHASE_HYPOTHESES = "hypotheses"
PHASE_DIAGNOSIS = "diagnosis"  # submitted, awaiting review and/or approval
PHASE_APPROVED = "approved"  # approved diagnosis, no active fix attempt
PHASE_FIXING = "fixing"  # a fix attempt is active
PHASE_HALTED = "halted"  # three strikes on the current diagnosis
PHASE_RESOLVED = "resolved"  # verify_fix passed; knowledge capture pending
PHASE_CLOSED = "closed"  # capture_knowledge done
PHASE_ABANDONED = "abandoned"

DONE_PHASES = frozenset({PHASE_RESOLVED, PHASE_CLOSED, PHASE_ABANDONED})

_NEXT_STEP = {
    PHASE_INVESTIGATING: "gather evidence, propose_hypotheses, then submit_diagnosis and get it approved",
    PHASE_HYPOTHESES: "test the hypotheses (resolve_hypothesis), then submit_diagnosis and get it approved",
    PHASE_DIAGNOSIS: "get the submitted diagnosis reviewed (record_review when confidence < 0.8) and "
    "approved, then call begin_fix",
    PHASE_APPROVED: "call begin_fix so the repository state is recorded before any edit",
    PHASE_HALTED: "three fix attempts failed: read the three-strike report (get_investigation), re-examine "
    "the assumptions and submit a new diagnosis with a different root cause for approval",
}


@dataclass(frozen=True)
class GateStatus:
    allowed: bool
    reason: str
    next_step: str
    investigation_id: str | None = None


def _same_tree(a: str, b: Path) -> bool:
    """True when two workspace paths are the same folder or one contains the other."""
    try:
        pa = Path(a).resolve()
        pb = b.resolve()
    except OSError:
        return False
    return pa == pb or pa in pb.parents or pb in pa.parents


def edit_gate_status(workspace: Path, state_path: Path | None = None) -> GateStatus:
    """Whether file edits in `workspace` are allowed by the protocol right now (read-only)."""
    workspace = Path(workspace)
    db = Path(state_path) if state_path is not None else default_state_path(workspace)
    if not db.exists():
        return GateStatus(True, "no trainsleuth investigation in this workspace", "edit freely", None)
    try:
        conn = sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True, timeout=10)
    except sqlite3.Error as exc:
        return GateStatus(
            False,
            f"cannot read the trainsleuth state {db}: {exc}",
            "check that the state database is readable (or run get_investigation through the server)",
            None,
        )
    try:
        conn.execute("PRAGMA busy_timeout=10000")
        has_table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='investigations'"
        ).fetchone()
        if not has_table:
            return GateStatus(True, "no trainsleuth investigation in this workspace", "edit freely", None)
        rows = conn.execute(
            "SELECT id, workspace, phase, symptom FROM investigations ORDER BY updated_at DESC"
        ).fetchall()
    except sqlite3.Error as exc:
        return GateStatus(
            False,
            f"cannot read the trainsleuth state {db}: {exc}",
            "check that the state database is readable (or run get_investigation through the server)",
            None,
        )
    finally:
        conn.close()

    relevant = [r for r in rows if r[2] not in DONE_PHASES and (r[1] is None or _same_tree(r[1], workspace))]
    blocking = [r for r in relevant if r[2] != PHASE_FIXING]
    # Halted investigations are reported first: they are the hardest stop.
    blocking.sort(key=lambda r: 0 if r[2] == PHASE_HALTED else 1)
    if blocking:
        inv_id, _, phase, symptom = blocking[0]
        if phase == PHASE_HALTED:
            reason = (
                f"investigation {inv_id} ({symptom}) is halted after three failed fix attempts; "
                "edits are refused until a new diagnosis is approved"
            )
        elif phase == PHASE_APPROVED:
            reason = f"investigation {inv_id} ({symptom}) has an approved diagnosis but no fix attempt begun"
        else:
            reason = (
                f"investigation {inv_id} ({symptom}) is open without an approved diagnosis (phase: {phase})"
            )
        step = _NEXT_STEP.get(phase, "continue the investigation with the trainsleuth protocol tools")
        return GateStatus(False, reason, f"{step} (investigation {inv_id})", inv_id)
    if relevant:
        inv_id = relevant[0][0]
        return GateStatus(
            True,
            f"investigation {inv_id} has an approved diagnosis and an active fix attempt",
            "make the one change the diagnosis proposes, then call verify_fix",
            inv_id,
        )
    return GateStatus(True, "no open trainsleuth investigation in this workspace", "edit freely", None)


__all__ = ["GateStatus", "edit_gate_status"]

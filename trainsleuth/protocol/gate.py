"""The edit gate: may the assistant edit files in this workspace right now?

Used by the edit-gate hooks (`trainsleuth hook CLIENT`) before every file edit. It reads the
protocol's authoritative state (outside the workspace, `state/location.py`) **without writing**,
and it fails closed: state that is missing while the workspace's marker says it existed, a database
that was replaced, rows that do not match their seal, or a missing signing key all refuse the edit
with a message saying which. Only a workspace that never had protocol state is open by default.

Rules (the protocol's guarantee 1, applied to raw edits), once the state is read and checked:
- no open investigation in the workspace: allowed;
- an investigation is open without an approved diagnosis (still investigating, hypotheses,
  diagnosis awaiting review or approval): refused, next step names the missing protocol step;
- an approved diagnosis but no fix attempt begun: refused until `begin_fix` records the repo state;
- an approved diagnosis with an active fix attempt: allowed;
- halted after three failed attempts: refused until a new diagnosis is approved;
- resolved, closed or abandoned investigations never block.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from trainsleuth.state import seal
from trainsleuth.state.location import (
    authoritative_db,
    governing_workspace,
    governs,
    legacy_db,
    marker_path,
    read_marker,
    real_workspace,
)

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
        pa = Path(os.path.realpath(a))
        pb = Path(os.path.realpath(b))
    except OSError:
        return False
    return pa == pb or pa in pb.parents or pb in pa.parents


_CHECK_STATE = (
    "the person checks the state: `trainsleuth state show` says what is wrong; `trainsleuth state accept`, run "
    "by the person in their own terminal, accepts it"
)


def _closed(reason: str, next_step: str = _CHECK_STATE) -> GateStatus:
    return GateStatus(False, f"the edit gate is closed: {reason}", next_step, None)


def _open_ro(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True, timeout=10)
    conn.execute("PRAGMA busy_timeout=10000")
    return conn


def _rows(conn: sqlite3.Connection) -> list[tuple[str, str, str, str]]:
    return [
        (str(r[0]), str(r[1]), str(r[2]), str(r[3]))
        for r in conn.execute(
            "SELECT id, workspace, phase, symptom FROM investigations ORDER BY updated_at DESC"
        )
    ]


def _has_investigations_table(conn: sqlite3.Connection) -> bool:
    return bool(
        conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='investigations'").fetchone()
    )


def edit_gate_status(workspace: Path, state_path: Path | None = None) -> GateStatus:
    """Whether file edits in `workspace` are allowed by the protocol right now (read-only, fails closed).

    Every governed folder at or above `workspace` has its say (the first refusal wins), so a decoy state
    planted in a subfolder cannot shadow the workspace's own."""
    workspace = Path(workspace)
    if state_path is not None:
        return _status_of(workspace, workspace, state_path)
    roots = []
    folder = governing_workspace(workspace)
    while folder is not None:
        roots.append(folder)
        folder = governing_workspace(folder.parent) if folder.parent != folder else None
    if not roots:
        return _status_of(workspace, workspace, None)
    answer = None
    for root in roots:
        status = _status_of(workspace, root, None)
        if not status.allowed:
            return status
        if answer is None or (answer.investigation_id is None and status.investigation_id):
            answer = status
    assert answer is not None
    return answer


def _status_of(workspace: Path, root: Path, state_path: Path | None) -> GateStatus:
    """The answer of one governed folder's state (`root`) for edits in `workspace`."""
    db = Path(state_path) if state_path is not None else authoritative_db(root)
    marker = read_marker(root) if state_path is None else None
    if not db.exists() and marker and marker.get("workspace") == str(real_workspace(root)):
        named = Path(str(marker.get("state") or ""))
        if named.is_absolute() and named.is_file():
            db = named  # a server started with --state: its database (the seal still has to hold)
    if not db.exists():
        if state_path is None and legacy_db(root).is_file():
            return _legacy_status(workspace, legacy_db(root))
        if marker is not None:
            owner = marker.get("workspace")
            if owner and owner != str(real_workspace(root)):
                return _closed(
                    f"the workspace marker {marker_path(root)} belongs to {owner} (this "
                    "folder was copied or moved), and no trainsleuth state exists for this folder"
                )
            return _closed(
                f"the trainsleuth state of this workspace ({db}) is missing, but the workspace's marker says "
                "investigations were kept there (it was deleted or moved)"
            )
        if state_path is not None:
            return _closed(f"the state database {db} given with --state does not exist")
        return GateStatus(True, "no trainsleuth investigation in this workspace", "edit freely", None)
    try:
        conn = _open_ro(db)
    except sqlite3.Error as exc:
        return _closed(f"cannot read the trainsleuth state {db}: {exc}")
    try:
        conn.execute("BEGIN")
        if not _has_investigations_table(conn):
            if marker is not None:
                return _closed(
                    f"the trainsleuth state {db} holds no investigations table, but the workspace's marker says "
                    "investigations were kept there (the database was replaced)"
                )
            return GateStatus(True, "no trainsleuth investigation in this workspace", "edit freely", None)
        try:
            key = seal.load_key(create=False)
        except seal.SealError as exc:
            return _closed(str(exc))
        problem = seal.problem(conn, key)
        if problem:
            return _closed(f"{problem} ({db})")
        rows = _rows(conn)
    except sqlite3.Error as exc:
        return _closed(f"cannot read the trainsleuth state {db}: {exc}")
    finally:
        conn.close()
    return _decide(rows, workspace)


def _legacy_status(workspace: Path, db: Path) -> GateStatus:
    """A database written by an older trainsleuth, not yet migrated (the server migrates it on start).
    It has no seal, so it is read as it is; a database that cannot be read closes the gate."""
    try:
        conn = _open_ro(db)
        try:
            rows = _rows(conn) if _has_investigations_table(conn) else []
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return _closed(f"cannot read the trainsleuth state {db}: {exc}")
    return _decide(rows, workspace)


def _decide(rows: list[tuple[str, str, str, str]], workspace: Path) -> GateStatus:
    relevant = [r for r in rows if r[2] not in DONE_PHASES and (not r[1] or _same_tree(r[1], workspace))]
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


__all__ = ["GateStatus", "edit_gate_status", "governing_workspace", "governs"]

"""The investigation state machine: every protocol rule is enforced here (no MCP imports).

Phases (stored in `investigations.phase`, read by the edit gate in `gate.py`):

    investigating -> hypotheses -> diagnosis -> approved -> fixing -> resolved -> closed
                                      ^            |  ^        |
                                      |  rejected / |  strike (1-2) / halted after 3 strikes
                                      +-- sent back +----------+

Every refusal raises `ProtocolError(message, next_step)` and is written to the timeline, so the
audit trail shows attempts to skip a gate as well as every transition.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trainsleuth.protocol import gate
from trainsleuth.protocol.ledger import ProtocolError, dumps, ensure_schema, new_id
from trainsleuth.protocol.models import (
    Approval,
    AttemptView,
    DiagnosisSpec,
    DiagnosisView,
    EvidenceItem,
    HypothesisOutcome,
    HypothesisSpec,
    HypothesisView,
    InvestigationSummary,
    InvestigationView,
    Pathway,
    Reproducible,
    ReviewView,
    Suggestion,
    TimelineEvent,
    Verdict,
)
from trainsleuth.protocol.store import Store

CONFIDENCE_NEEDS_REVIEW = 0.8
MAX_STRIKES = 3
QUICK_PATH_LIMIT_S = 15 * 60
SHOTGUN_FILES = 5
DEFAULT_REPRODUCER_TIMEOUT_S = 600.0

INVESTIGATING = gate.PHASE_INVESTIGATING
HYPOTHESES = gate.PHASE_HYPOTHESES
DIAGNOSIS = gate.PHASE_DIAGNOSIS
APPROVED = gate.PHASE_APPROVED
FIXING = gate.PHASE_FIXING
HALTED = gate.PHASE_HALTED
RESOLVED = gate.PHASE_RESOLVED
CLOSED = gate.PHASE_CLOSED
DONE = gate.DONE_PHASES

_QUICK_BLOCKERS = re.compile(
    r"\b(intermittent\w*|sometimes|flaky|random\w*|non-?determin\w*|hangs?|hung|deadlock\w*|distributed|"
    r"multi-?node|nccl|ranks?|races?|occasional\w*|unknown|unclear)\b",
    re.IGNORECASE,
)


def normalise_root_cause(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def same_root_cause(a: str, b: str) -> bool:
    na, nb = normalise_root_cause(a), normalise_root_cause(b)
    if na == nb:
        return True
    return difflib.SequenceMatcher(None, na, nb).ratio() >= 0.85


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, tz=dt.timezone.utc).isoformat(timespec="seconds")


def choose_pathway(
    symptom: str, reproducible: Reproducible, what_changed: str | None, observed: str | None
) -> tuple[Pathway, str]:
    text = " ".join(filter(None, [symptom, observed or ""]))
    if reproducible != "always":
        return "full", f"reproducible is {reproducible!r}: the full protocol applies"
    if not what_changed:
        return "full", "no known change to blame: the full protocol applies"
    blocker = _QUICK_BLOCKERS.search(text)
    if blocker:
        return "full", f"the symptom mentions {blocker.group(0)!r}: the full protocol applies"
    return "quick", "reproducible every time right after a known change: the quick pathway applies"


class Protocol:
    """All protocol operations on one state store. Each operation is one write transaction."""

    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._depth = 0
        # Protocol changes made during this object's calls that the caller should announce.
        self.notices: list[str] = []
        ensure_schema(store)

    # ------------------------------------------------------------------ plumbing

    def _inv_row(self, conn: sqlite3.Connection, inv_id: str) -> dict[str, Any]:
        row = conn.execute("SELECT * FROM investigations WHERE id = ?", (inv_id,)).fetchone()
        if row is None:
            raise ProtocolError(
                f"investigation {inv_id!r} does not exist in this workspace",
                "call list_investigations to see the open ones, or start_investigation to open one",
            )
        inv = dict(row)
        inv["data"] = json.loads(inv["data"])
        return inv

    def _event(
        self,
        conn: sqlite3.Connection,
        inv_id: str,
        kind: str,
        phase: str,
        summary: str,
        data: dict[str, Any] | None = None,
    ) -> None:
        now = self.clock()
        conn.execute(
            "INSERT INTO events(investigation_id, at, kind, phase, summary, data) VALUES(?,?,?,?,?,?)",
            (inv_id, now, kind, phase, summary, dumps(data or {})),
        )

    def _save(self, conn: sqlite3.Connection, inv: dict[str, Any]) -> None:
        inv["updated_at"] = self.clock()
        conn.execute(
            "UPDATE investigations SET updated_at=?, phase=?, pathway=?, data=? WHERE id=?",
            (inv["updated_at"], inv["phase"], inv["pathway"], dumps(inv["data"]), inv["id"]),
        )

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """A write transaction; a refusal raised inside it is audited after the rollback."""
        self._depth += 1
        try:
            with self.store.transaction() as conn:
                yield conn
        except ProtocolError as exc:
            inv_id = getattr(exc, "audit_investigation", None)
            if inv_id and self._depth == 1:
                self._audit_refusal(inv_id, exc.message, exc.next_step or "")
            raise
        finally:
            self._depth -= 1

    def _audit_refusal(self, inv_id: str, message: str, next_step: str) -> None:
        try:
            with self.store.transaction() as conn:
                row = conn.execute("SELECT phase FROM investigations WHERE id=?", (inv_id,)).fetchone()
                if row is not None:
                    self._event(
                        conn, inv_id, "refused", row["phase"], message[:500], {"next_step": next_step}
                    )
        except sqlite3.Error:
            pass

    def refuse(self, inv_id: str | None, message: str, next_step: str) -> ProtocolError:
        """Return the refusal to raise; it is recorded in the audit trail (after any open transaction)."""
        err = ProtocolError(message, next_step)
        if inv_id:
            if self._depth:
                err.audit_investigation = inv_id  # type: ignore[attr-defined]
            else:
                self._audit_refusal(inv_id, message, next_step)
        return err

    def _escalate_if_due(
        self, conn: sqlite3.Connection, inv: dict[str, Any], reason: str | None = None
    ) -> bool:
        if inv["pathway"] != "quick" or inv["phase"] in DONE:
            return False
        if reason is None:
            age = self.clock() - inv["created_at"]
            if age < QUICK_PATH_LIMIT_S:
                return False
            reason = f"{int(age // 60)} minutes without a resolution on the quick pathway"
        inv["pathway"] = "full"
        self.notices.append(
            f"investigation {inv['id']} switched from the quick pathway to the full protocol: {reason}; "
            "a diagnosis now needs ranked hypotheses, tested one at a time"
        )
        inv["data"]["escalation"] = {"at": self.clock(), "at_iso": iso(self.clock()), "reason": reason}
        self._event(
            conn,
            inv["id"],
            "escalated",
            inv["phase"],
            f"switched from the quick pathway to the full protocol: {reason}",
            {"reason": reason},
        )
        self._save(conn, inv)
        return True

    def _evidence_ids(self, conn: sqlite3.Connection, inv_id: str) -> set[str]:
        return {r["id"] for r in conn.execute("SELECT id FROM evidence WHERE investigation_id=?", (inv_id,))}

    def _check_evidence(self, conn: sqlite3.Connection, inv_id: str, ids: list[str], what: str) -> None:
        if not ids:
            raise self.refuse(
                inv_id,
                f"{what} must cite at least one evidence id",
                "gather evidence first (analysis tools with investigation_id, or record_evidence) and cite "
                "its ids",
            )
        known = self._evidence_ids(conn, inv_id)
        missing = [e for e in ids if e not in known]
        if missing:
            raise self.refuse(
                inv_id,
                f"{what} cites evidence that does not exist on investigation {inv_id}: {', '.join(missing)}",
                "cite ids returned by record_evidence or by analysis tools called with this investigation_id "
                "(get_investigation lists them)",
            )

    def _diagnosis(self, conn: sqlite3.Connection, diag_id: str) -> dict[str, Any]:
        row = conn.execute("SELECT * FROM diagnoses WHERE id=?", (diag_id,)).fetchone()
        if row is None:
            raise ProtocolError(f"diagnosis {diag_id!r} does not exist", "call get_investigation")
        d = dict(row)
        d["data"] = json.loads(d["data"])
        return d

    def _set_diag_status(self, conn: sqlite3.Connection, diag_id: str, status: str, **extra: Any) -> None:
        d = self._diagnosis(conn, diag_id)
        d["data"].update(extra)
        conn.execute("UPDATE diagnoses SET status=?, data=? WHERE id=?", (status, dumps(d["data"]), diag_id))

    def _current_diagnosis(self, conn: sqlite3.Connection, inv: dict[str, Any]) -> dict[str, Any] | None:
        diag_id = inv["data"].get("current_diagnosis_id")
        return self._diagnosis(conn, diag_id) if diag_id else None

    def _same_cause(self, conn: sqlite3.Connection, diag_id: str) -> list[str]:
        """This diagnosis and every diagnosis of its investigation naming the same root cause.

        Strikes count per root cause, so resubmitting the same cause does not reset them."""
        d = self._diagnosis(conn, diag_id)
        cause = d["data"]["root_cause"]
        rows = conn.execute(
            "SELECT id, data FROM diagnoses WHERE investigation_id=?", (d["investigation_id"],)
        ).fetchall()
        return [
            r["id"]
            for r in rows
            if r["id"] == diag_id or same_root_cause(json.loads(r["data"])["root_cause"], cause)
        ]

    def _failed_attempts(self, conn: sqlite3.Connection, diag_id: str) -> int:
        ids = self._same_cause(conn, diag_id)
        marks = ",".join("?" * len(ids))
        row = conn.execute(
            f"SELECT COUNT(*) AS n FROM fix_attempts WHERE diagnosis_id IN ({marks}) AND status='failed'", ids
        ).fetchone()
        return int(row["n"])

    # ------------------------------------------------------------------ next steps

    def next_step(self, inv: dict[str, Any], conn: sqlite3.Connection | None = None) -> str:
        phase = inv["phase"]
        quick = inv["pathway"] == "quick"
        if phase == INVESTIGATING:
            if quick:
                return (
                    "gather evidence for the obvious cause (analysis tools with investigation_id, or "
                    "record_evidence), then submit_diagnosis"
                )
            return (
                "investigate and compare with what works (analysis tools with investigation_id, "
                "record_evidence), then propose_hypotheses (3-5, ranked)"
            )
        if phase == HYPOTHESES:
            return (
                "test the hypothesis under test and resolve_hypothesis citing evidence ids; once one is "
                "confirmed, submit_diagnosis"
            )
        if phase == DIAGNOSIS:
            status = None
            if conn is not None:
                diag = self._current_diagnosis(conn, inv)
                status = diag["status"] if diag else None
            if status == "awaiting_review":
                return (
                    "confidence is below 0.8: get a critical review (the critical_review prompt) and "
                    "record_review; CONFIRMED allows approval"
                )
            return "approve_diagnosis: the person approves or rejects the diagnosis before any fix"
        if phase == APPROVED:
            return "begin_fix, make the one change the diagnosis proposes, then verify_fix"
        if phase == FIXING:
            return "make the one change the diagnosis proposes, then verify_fix (it runs the reproducer)"
        if phase == HALTED:
            return (
                "three fix attempts failed: read the three-strike report, re-examine the assumptions, "
                "propose_hypotheses again and submit_diagnosis with a different root cause"
            )
        if phase == RESOLVED:
            return "capture_knowledge: write the root-cause analysis (and any new constraint or fix pattern)"
        return "nothing: the investigation is closed"

    # ------------------------------------------------------------------ operations

    def start(
        self,
        *,
        symptom: str,
        workspace: Path,
        expected: str | None = None,
        observed: str | None = None,
        started_when: str | None = None,
        what_changed: str | None = None,
        reproducible: Reproducible = "unknown",
        reproducer: str | None = None,
        reproducer_timeout_s: float = DEFAULT_REPRODUCER_TIMEOUT_S,
        pathway: Pathway | None = None,
        suggestions: list[Suggestion] | None = None,
    ) -> InvestigationView:
        if not symptom.strip():
            raise ProtocolError("the symptom is empty", "describe what goes wrong, in one or two sentences")
        auto_pathway, reason = choose_pathway(symptom, reproducible, what_changed, observed)
        if pathway is None:
            pathway = auto_pathway
        else:
            reason = f"pathway {pathway!r} chosen by the caller (the description suggests {auto_pathway!r})"
        inv_id = new_id("inv")
        now = self.clock()
        data = {
            "expected": expected,
            "observed": observed,
            "started_when": started_when,
            "what_changed": what_changed,
            "reproducible": reproducible,
            "reproducer": reproducer,
            "reproducer_timeout_s": reproducer_timeout_s,
            "pathway_reason": reason,
            "suggestions": [s.model_dump() for s in suggestions or []],
            "current_diagnosis_id": None,
        }
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO investigations(id, created_at, updated_at, workspace, symptom, pathway, phase, data) "
                "VALUES(?,?,?,?,?,?,?,?)",
                (inv_id, now, now, str(workspace), symptom, pathway, INVESTIGATING, dumps(data)),
            )
            self._event(
                conn,
                inv_id,
                "started",
                INVESTIGATING,
                f"investigation opened on the {pathway} pathway: {symptom[:200]}",
                {"pathway": pathway, "pathway_reason": reason, "reproducer": reproducer},
            )
        return self.get(inv_id)

    def get(self, inv_id: str) -> InvestigationView:
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            self._escalate_if_due(conn, inv)
            return self._view(conn, inv)

    def list_all(self, include_closed: bool = True) -> list[InvestigationSummary]:
        with self._tx() as conn:
            rows = conn.execute("SELECT id FROM investigations ORDER BY created_at DESC").fetchall()
            out = []
            for r in rows:
                inv = self._inv_row(conn, r["id"])
                self._escalate_if_due(conn, inv)
                if not include_closed and inv["phase"] in DONE:
                    continue
                out.append(self._summary(conn, inv))
            return out

    def record_evidence(self, inv_id: str, summary: str, data: Any, source: str = "assistant") -> str:
        if not summary.strip():
            raise ProtocolError("the evidence summary is empty", "say in one line what was observed")
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            self._escalate_if_due(conn, inv)
            if inv["phase"] == CLOSED:
                raise ProtocolError(
                    f"investigation {inv_id} is closed", "start_investigation for a new problem"
                )
            ev_id = new_id("ev")
            now = self.clock()
            conn.execute(
                "INSERT INTO evidence(id, investigation_id, created_at, source, summary, data) VALUES(?,?,?,?,?,?)",
                (ev_id, inv_id, now, source, summary[:2000], dumps(data)),
            )
            self._event(
                conn,
                inv_id,
                "evidence",
                inv["phase"],
                f"evidence {ev_id} from {source}: {summary[:200]}",
                {"evidence_id": ev_id, "source": source},
            )
            self._save(conn, inv)
        return ev_id

    def propose_hypotheses(self, inv_id: str, hypotheses: list[HypothesisSpec]) -> list[HypothesisView]:
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            self._escalate_if_due(conn, inv)
            phase = inv["phase"]
            if phase == FIXING:
                raise ProtocolError(
                    "a fix attempt is active", "verify_fix first (with revert: true if it fails)"
                )
            if phase in DONE:
                raise ProtocolError(
                    f"investigation {inv_id} is {phase}", "start_investigation for a new problem"
                )
            if not 3 <= len(hypotheses) <= 5:
                raise ProtocolError(
                    f"propose 3 to 5 ranked hypotheses (got {len(hypotheses)})",
                    "list the most likely first, each with what would confirm it and what would rule it out",
                )
            for i, h in enumerate(hypotheses, 1):
                if not (h.statement.strip() and h.confirm_if.strip() and h.rule_out_if.strip()):
                    raise ProtocolError(
                        f"hypothesis {i} lacks a statement, a confirming or a ruling-out observation",
                        "fill statement, confirm_if and rule_out_if for every hypothesis",
                    )
            row = conn.execute(
                "SELECT COALESCE(MAX(round), 0) AS r FROM hypotheses WHERE investigation_id=?", (inv_id,)
            ).fetchone()
            rnd = int(row["r"]) + 1
            conn.execute(
                "UPDATE hypotheses SET status='superseded' WHERE investigation_id=? AND status IN ('pending','testing')",
                (inv_id,),
            )
            now = self.clock()
            for rank, h in enumerate(hypotheses, 1):
                conn.execute(
                    "INSERT INTO hypotheses(id, investigation_id, created_at, round, rank, status, data) "
                    "VALUES(?,?,?,?,?,?,?)",
                    (
                        new_id("hyp"),
                        inv_id,
                        now,
                        rnd,
                        rank,
                        "testing" if rank == 1 else "pending",
                        dumps(h.model_dump()),
                    ),
                )
            if phase == DIAGNOSIS:
                diag = self._current_diagnosis(conn, inv)
                if diag is not None:
                    self._set_diag_status(conn, diag["id"], "withdrawn")
                inv["data"]["current_diagnosis_id"] = None
            if phase in (INVESTIGATING, HYPOTHESES, DIAGNOSIS, HALTED):
                inv["phase"] = HYPOTHESES
            self._event(
                conn,
                inv_id,
                "hypotheses_proposed",
                inv["phase"],
                f"round {rnd}: {len(hypotheses)} hypotheses; testing #1: {hypotheses[0].statement[:150]}",
                {"round": rnd},
            )
            self._save(conn, inv)
            return [h for h in self._hypotheses(conn, inv_id) if h.round == rnd]

    def resolve_hypothesis(
        self,
        inv_id: str,
        hypothesis_id: str,
        outcome: HypothesisOutcome,
        evidence_ids: list[str],
        note: str | None,
    ) -> tuple[HypothesisView, HypothesisView | None]:
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            self._escalate_if_due(conn, inv)
            row = conn.execute(
                "SELECT * FROM hypotheses WHERE id=? AND investigation_id=?", (hypothesis_id, inv_id)
            ).fetchone()
            if row is None:
                raise ProtocolError(
                    f"hypothesis {hypothesis_id!r} is not part of investigation {inv_id}",
                    "use a hypothesis id from propose_hypotheses (get_investigation lists them)",
                )
            if row["status"] != "testing":
                testing = conn.execute(
                    "SELECT id FROM hypotheses WHERE investigation_id=? AND status='testing'", (inv_id,)
                ).fetchone()
                hint = (
                    f"test one hypothesis at a time: {testing['id']} is under test; resolve it first"
                    if testing
                    else "propose_hypotheses for a new round"
                )
                raise self.refuse(
                    inv_id, f"hypothesis {hypothesis_id} is {row['status']}, not under test", hint
                )
            self._check_evidence(conn, inv_id, evidence_ids, "resolving a hypothesis")
            data = json.loads(row["data"])
            data.update({"evidence_ids": evidence_ids, "note": note})
            conn.execute(
                "UPDATE hypotheses SET status=?, data=? WHERE id=?", (outcome, dumps(data), hypothesis_id)
            )
            nxt = None
            if outcome == "ruled_out":
                nrow = conn.execute(
                    "SELECT id FROM hypotheses WHERE investigation_id=? AND round=? AND status='pending' "
                    "ORDER BY rank LIMIT 1",
                    (inv_id, row["round"]),
                ).fetchone()
                if nrow is not None:
                    conn.execute("UPDATE hypotheses SET status='testing' WHERE id=?", (nrow["id"],))
                    nxt = nrow["id"]
            self._event(
                conn,
                inv_id,
                "hypothesis_resolved",
                inv["phase"],
                f"hypothesis {hypothesis_id} {outcome.replace('_', ' ')} citing {', '.join(evidence_ids)}"
                + (f"; now testing {nxt}" if nxt else ""),
                {
                    "hypothesis_id": hypothesis_id,
                    "outcome": outcome,
                    "evidence_ids": evidence_ids,
                    "next": nxt,
                },
            )
            self._save(conn, inv)
            hyps = {h.id: h for h in self._hypotheses(conn, inv_id)}
            return hyps[hypothesis_id], (hyps[nxt] if nxt else None)

    def submit_diagnosis(self, inv_id: str, spec: DiagnosisSpec) -> DiagnosisView:
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            self._escalate_if_due(conn, inv)
            phase = inv["phase"]
            if phase == FIXING:
                raise self.refuse(
                    inv_id, "a fix attempt is active on the approved diagnosis", "verify_fix first"
                )
            if phase in DONE:
                raise ProtocolError(
                    f"investigation {inv_id} is {phase}", "start_investigation for a new problem"
                )
        # Gate 4 checks, in the order an assistant should fix them.
        with self.store.connect() as conn:
            self._check_evidence(conn, inv_id, spec.evidence_ids, "a diagnosis (Gate 4)")
        if not spec.disproving_observation.strip():
            raise self.refuse(
                inv_id,
                "a diagnosis (Gate 4) must state the observation that would disprove its root cause",
                "fill disproving_observation (and disproof_looked_for: whether you looked for it)",
            )
        for name in ("symptom", "root_cause", "mechanism"):
            if not str(getattr(spec, name)).strip():
                raise self.refuse(inv_id, f"the diagnosis field {name} is empty", f"fill {name}")
        if not spec.proposed_fix.change.strip():
            raise self.refuse(
                inv_id, "the proposed fix is empty", "describe the one change in proposed_fix.change"
            )
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            phase = inv["phase"]
            hypothesis_id = spec.hypothesis_id
            if inv["pathway"] == "full":
                confirmed = conn.execute(
                    "SELECT id FROM hypotheses WHERE investigation_id=? AND status='confirmed' "
                    "ORDER BY created_at DESC, rank",
                    (inv_id,),
                ).fetchall()
                confirmed_ids = [r["id"] for r in confirmed]
                if hypothesis_id is None and confirmed_ids:
                    hypothesis_id = confirmed_ids[0]
                if hypothesis_id is None:
                    escalated = (
                        " (the investigation escalated from the quick pathway)"
                        if inv["data"].get("escalation")
                        else ""
                    )
                    raise self.refuse(
                        inv_id,
                        f"the full protocol requires a confirmed hypothesis before a diagnosis{escalated}",
                        "propose_hypotheses (3-5, ranked), test them one at a time and resolve_hypothesis "
                        "citing evidence; then submit_diagnosis",
                    )
                if hypothesis_id not in confirmed_ids:
                    raise self.refuse(
                        inv_id,
                        f"hypothesis {hypothesis_id} is not a confirmed hypothesis of this investigation",
                        "cite a hypothesis confirmed with resolve_hypothesis",
                    )
            struck = conn.execute(
                "SELECT id, data FROM diagnoses WHERE investigation_id=? AND status='struck_out'", (inv_id,)
            ).fetchall()
            for r in struck:
                old = json.loads(r["data"])["root_cause"]
                if same_root_cause(old, spec.root_cause):
                    raise self.refuse(
                        inv_id,
                        f"diagnosis {r['id']} with this root cause already failed three fix attempts; a new "
                        "diagnosis must name a different root cause",
                        "re-examine the assumptions in the three-strike report and diagnose a different root "
                        "cause",
                    )
            old = self._current_diagnosis(conn, inv)
            if old is not None and old["status"] in ("awaiting_review", "awaiting_approval", "approved"):
                self._set_diag_status(conn, old["id"], "superseded")
            diag_id = new_id("diag")
            status = "awaiting_review" if spec.confidence < CONFIDENCE_NEEDS_REVIEW else "awaiting_approval"
            data = spec.model_dump()
            data["hypothesis_id"] = hypothesis_id
            conn.execute(
                "INSERT INTO diagnoses(id, investigation_id, created_at, status, confidence, root_cause_key, data) "
                "VALUES(?,?,?,?,?,?,?)",
                (
                    diag_id,
                    inv_id,
                    self.clock(),
                    status,
                    spec.confidence,
                    normalise_root_cause(spec.root_cause),
                    dumps(data),
                ),
            )
            inv["data"]["current_diagnosis_id"] = diag_id
            inv["phase"] = DIAGNOSIS
            self._event(
                conn,
                inv_id,
                "diagnosis_submitted",
                DIAGNOSIS,
                f"diagnosis {diag_id} (confidence {spec.confidence:.2f}, {status.replace('_', ' ')}): "
                f"{spec.root_cause[:200]}",
                {"diagnosis_id": diag_id, "status": status, "replaced": old["id"] if old else None},
            )
            self._save(conn, inv)
            return self._diagnosis_view(conn, self._diagnosis(conn, diag_id))

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
            rev_id = new_id("rev")
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
            review = self._reviews(conn, diag["id"])[-1]
            return review, self._diagnosis_view(conn, self._diagnosis(conn, diag["id"]))

    def approvable(self, inv_id: str, diagnosis_id: str | None = None) -> DiagnosisView:
        """The diagnosis that approval would act on; refuses when it cannot be approved yet."""
        with self.store.connect() as conn:
            inv = self._inv_row(conn, inv_id)
            diag = self._current_diagnosis(conn, inv)
            if diag is None or inv["phase"] != DIAGNOSIS:
                raise self.refuse(
                    inv_id,
                    f"there is no diagnosis awaiting approval (phase: {inv['phase']})",
                    "submit_diagnosis first (Gate 4)"
                    if inv["phase"] not in (APPROVED, FIXING)
                    else "the diagnosis is already approved: begin_fix",
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
            return self._diagnosis_view(conn, diag)

    def decide(
        self,
        inv_id: str,
        diagnosis_id: str,
        *,
        decision: str,
        path: str,
        approver: str | None,
        words: str | None,
    ) -> DiagnosisView:
        self.approvable(inv_id, diagnosis_id)
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            approval = Approval(
                path=path,
                decision=decision,
                approver=approver,
                words=words,
                at=self.clock(),
            )
            if decision == "approve":
                self._set_diag_status(conn, diagnosis_id, "approved", approval=approval.model_dump())
                inv["phase"] = APPROVED
                summary = f"diagnosis {diagnosis_id} approved by {approver or 'the person'} via {path}"
                kind = "diagnosis_approved"
            else:
                self._set_diag_status(conn, diagnosis_id, "rejected", approval=approval.model_dump())
                inv["data"]["current_diagnosis_id"] = None
                inv["phase"] = HYPOTHESES
                summary = f"diagnosis {diagnosis_id} rejected by {approver or 'the person'} via {path}" + (
                    f": {words}" if words else ""
                )
                kind = "diagnosis_rejected"
            self._event(conn, inv_id, kind, inv["phase"], summary[:500], approval.model_dump())
            self._save(conn, inv)
            return self._diagnosis_view(conn, self._diagnosis(conn, diagnosis_id))

    def record_cancelled_approval(self, inv_id: str, diagnosis_id: str, detail: str) -> None:
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            self._event(
                conn,
                inv_id,
                "approval_cancelled",
                inv["phase"],
                f"approval of {diagnosis_id}: {detail}",
                {"diagnosis_id": diagnosis_id},
            )

    # ------------------------------------------------------------------ fixes

    def begin_fix(
        self, inv_id: str, description: str, reproducer: str | None, state_dir: Path
    ) -> AttemptView:
        from trainsleuth.protocol.snapshot import SnapshotError, take_snapshot

        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            self._escalate_if_due(conn, inv)
        with self.store.connect() as conn:
            inv = self._inv_row(conn, inv_id)
            diag = self._current_diagnosis(conn, inv)
            phase = inv["phase"]
            if phase == FIXING:
                raise self.refuse(
                    inv_id, "a fix attempt is already active", "verify_fix it first (one change at a time)"
                )
            struck = (diag is not None and diag["status"] == "struck_out") or phase == HALTED
            if struck:
                report = inv["data"].get("three_strike_report") or ""
                raise self.refuse(
                    inv_id,
                    "begin_fix is refused: three fix attempts failed on this diagnosis (three strikes). "
                    + "A new diagnosis with a different root cause must be approved first.\n\n"
                    + report[:6000],
                    "re-examine the assumptions in the three-strike report, propose_hypotheses, and "
                    "submit_diagnosis with a different root cause for approval",
                )
            if diag is None or diag["status"] != "approved" or phase != APPROVED:
                missing = "submit_diagnosis (Gate 4) and get it approved"
                if diag is not None and diag["status"] == "awaiting_review":
                    missing = "record_review with a CONFIRMED verdict, then approve_diagnosis"
                elif diag is not None and diag["status"] == "awaiting_approval":
                    missing = "approve_diagnosis (the person approves the diagnosis)"
                raise self.refuse(
                    inv_id,
                    f"begin_fix is refused: investigation {inv_id} has no approved diagnosis (phase: {phase})",
                    missing,
                )
            if inv["pathway"] == "full":
                n = conn.execute(
                    "SELECT COUNT(*) AS n FROM hypotheses WHERE investigation_id=?", (inv_id,)
                ).fetchone()["n"]
                if not n:
                    raise self.refuse(
                        inv_id,
                        "the investigation escalated to the full protocol: begin_fix needs ranked hypotheses first",
                        "propose_hypotheses (3-5, ranked) and test them before another fix attempt",
                    )
            current = inv["data"].get("reproducer")
            if not current and not reproducer:
                raise self.refuse(
                    inv_id,
                    "no reproducer command is recorded: verify_fix could not verify the fix",
                    "call begin_fix again with reproducer: a shell command that fails now and passes when fixed",
                )
            if current and reproducer and reproducer != current:
                raise self.refuse(
                    inv_id,
                    f"the reproducer is already recorded ({current!r}) and cannot be swapped during a fix",
                    "call begin_fix without reproducer",
                )
            same = self._same_cause(conn, diag["id"])
            number = (
                conn.execute(
                    f"SELECT COUNT(*) AS n FROM fix_attempts WHERE diagnosis_id IN ({','.join('?' * len(same))})",
                    same,
                ).fetchone()["n"]
                + 1
            )
            workspace = Path(inv["workspace"])
        if not description.strip():
            raise ProtocolError("describe the one change this attempt makes", "fill description")
        attempt_id = new_id("fix")
        try:
            snap = take_snapshot(workspace, state_dir, f"{inv_id}/{attempt_id}/before")
        except SnapshotError as exc:
            raise ProtocolError(
                f"cannot record the repository state before the fix: {exc}",
                "begin_fix needs the workspace in a git repository (git init && git add -A && git commit -m "
                "baseline), so the attempt's diff can be stored and reverted",
            ) from exc
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            if inv["phase"] != APPROVED:
                raise ProtocolError("the investigation changed while the fix began", "call get_investigation")
            if reproducer and not inv["data"].get("reproducer"):
                inv["data"]["reproducer"] = reproducer
            data = {"description": description, "snapshot": snap.to_dict()}
            conn.execute(
                "INSERT INTO fix_attempts(id, investigation_id, diagnosis_id, number, created_at, status, data) "
                "VALUES(?,?,?,?,?,?,?)",
                (attempt_id, inv_id, diag["id"], number, self.clock(), "active", dumps(data)),
            )
            inv["phase"] = FIXING
            inv["data"]["active_attempt_id"] = attempt_id
            self._event(
                conn,
                inv_id,
                "fix_begun",
                FIXING,
                f"fix attempt {number} ({attempt_id}) begun at HEAD {(snap.head or 'none')[:10]}"
                + (" with uncommitted changes snapshotted" if snap.dirty else "")
                + f": {description[:200]}",
                {"attempt_id": attempt_id, "snapshot": snap.to_dict()},
            )
            self._save(conn, inv)
            return self._attempts(conn, inv_id, attempt_id)[0]

    def verify_fix(
        self,
        inv_id: str,
        *,
        state_dir: Path,
        timeout_s: float | None,
        revert: bool,
        learned: str | None,
        cancel_event: threading.Event | None = None,
    ) -> tuple[AttemptView, InvestigationView]:
        from trainsleuth.protocol.snapshot import (
            Snapshot,
            SnapshotError,
            diff_changes,
            diff_text,
            restore_files,
            take_snapshot,
        )
        from trainsleuth.tools.process import run_process

        with self.store.connect() as conn:
            inv = self._inv_row(conn, inv_id)
            attempt_id = inv["data"].get("active_attempt_id")
            if inv["phase"] != FIXING or not attempt_id:
                raise self.refuse(
                    inv_id,
                    f"there is no active fix attempt to verify (phase: {inv['phase']})",
                    "begin_fix first (it needs an approved diagnosis)",
                )
            row = conn.execute("SELECT * FROM fix_attempts WHERE id=?", (attempt_id,)).fetchone()
            adata = json.loads(row["data"])
            diag = self._diagnosis(conn, row["diagnosis_id"])
        before = Snapshot.from_dict(adata["snapshot"])
        workspace = Path(inv["workspace"])
        try:
            after = take_snapshot(workspace, state_dir, f"{inv_id}/{attempt_id}/after")
            changes = diff_changes(before, after)
            diff = diff_text(before, after)
        except SnapshotError as exc:
            raise ProtocolError(
                f"cannot record the attempt's changes: {exc}", "check the git repository"
            ) from exc
        root = Path(before.repo_root)
        changed = [c.path for c in changes]
        command = inv["data"]["reproducer"]
        warnings, tampered = self._fix_warnings(changed, diag["data"], root, workspace, command)
        limit = timeout_s or float(inv["data"].get("reproducer_timeout_s") or DEFAULT_REPRODUCER_TIMEOUT_S)
        try:
            proc = run_process(
                ["/bin/sh", "-c", command], cwd=workspace, timeout_s=limit, cancel_event=cancel_event
            )
            exit_code = proc.returncode
            tail = proc.output_tail()
            passed = proc.ok and not tampered
            timed_out = proc.timed_out
            if proc.cancelled:
                raise ProtocolError(
                    "verify_fix was cancelled before the reproducer finished; the attempt is still active",
                    "call verify_fix again",
                )
        except (FileNotFoundError, PermissionError) as exc:
            raise ProtocolError(f"cannot run the reproducer: {exc}", "check the reproducer command") from exc
        reverted: list[str] = []
        revert_note = None
        if revert and not passed:
            res = restore_files(before, after)
            reverted = res.restored + res.removed
            if res.skipped:
                revert_note = f"left alone (changed again while verifying): {', '.join(res.skipped)}"
                warnings.append(revert_note)
        elif revert and passed:
            warnings.append("revert was requested but the reproducer passed: nothing was reverted")
        now = self.clock()
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            ev_id = new_id("ev")
            if passed:
                verdict = "passed"
            elif tampered and exit_code == 0:
                verdict = "passed only after the attempt changed it, so it does not count"
            else:
                verdict = "timed out" if timed_out else "failed"
            summary = f"verify_fix attempt {row['number']}: reproducer {verdict} (exit code {exit_code})"
            conn.execute(
                "INSERT INTO evidence(id, investigation_id, created_at, source, summary, data) VALUES(?,?,?,?,?,?)",
                (
                    ev_id,
                    inv_id,
                    now,
                    "verify_fix",
                    summary,
                    dumps(
                        {
                            "command": command,
                            "exit_code": exit_code,
                            "timed_out": timed_out,
                            "output_tail": tail,
                            "attempt_id": attempt_id,
                            "changed_files": changed,
                        }
                    ),
                ),
            )
            adata.update(
                {
                    "after": after.to_dict(),
                    "changed_files": changed,
                    "diff": diff,
                    "exit_code": exit_code,
                    "timed_out": timed_out,
                    "output_tail": tail,
                    "evidence_id": ev_id,
                    "warnings": warnings,
                    "reverted": reverted,
                    "learned": learned,
                }
            )
            status = "passed" if passed else "failed"
            conn.execute(
                "UPDATE fix_attempts SET status=?, finished_at=?, data=? WHERE id=?",
                (status, now, dumps(adata), attempt_id),
            )
            inv["data"]["active_attempt_id"] = None
            self._event(
                conn,
                inv_id,
                "evidence",
                inv["phase"],
                f"evidence {ev_id} from verify_fix: {summary}",
                {"evidence_id": ev_id, "source": "verify_fix"},
            )
            if passed:
                self._set_diag_status(conn, diag["id"], "resolved")
                inv["phase"] = RESOLVED
                self._event(
                    conn,
                    inv_id,
                    "resolved",
                    RESOLVED,
                    f"attempt {row['number']} verified: the reproducer passed",
                    {"attempt_id": attempt_id, "evidence_id": ev_id},
                )
            else:
                strikes = self._failed_attempts(conn, diag["id"])
                inv["phase"] = APPROVED
                self._event(
                    conn,
                    inv_id,
                    "strike",
                    APPROVED,
                    f"attempt {row['number']} failed verification: strike {strikes} of {MAX_STRIKES}"
                    + (f"; reverted {len(reverted)} file(s)" if reverted else ""),
                    {"attempt_id": attempt_id, "strikes": strikes, "reverted": reverted},
                )
                if inv["pathway"] == "quick":
                    self._escalate_if_due(conn, inv, reason="the first fix attempt failed")
                if strikes >= MAX_STRIKES:
                    self._set_diag_status(conn, diag["id"], "struck_out")
                    inv["phase"] = HALTED
                    inv["data"]["three_strike_report"] = self._three_strike_report(conn, inv, diag["id"])
                    self._event(
                        conn,
                        inv_id,
                        "halted",
                        HALTED,
                        f"three failed fix attempts on diagnosis {diag['id']}: investigation halted",
                        {"diagnosis_id": diag["id"]},
                    )
            self._save(conn, inv)
            attempt = self._attempts(conn, inv_id, attempt_id)[0]
            return attempt, self._view(conn, inv)

    def _fix_warnings(
        self, changed: list[str], diag: dict[str, Any], root: Path, workspace: Path, reproducer: str = ""
    ) -> tuple[list[str], list[str]]:
        """Warnings about the attempt, and the files it changed that the reproducer command names
        (outside the approved proposed fix): a pass with those changed does not count."""
        warnings: list[str] = []
        if not changed:
            warnings.append("no file changed since begin_fix: the attempt changed nothing")
            return warnings, []
        planned = set()
        for f in diag.get("proposed_fix", {}).get("files", []):
            p = Path(f)
            full = p if p.is_absolute() else workspace / p
            try:
                planned.add(full.resolve().relative_to(root.resolve()).as_posix())
            except ValueError:
                planned.add(p.as_posix())
        outside = [c for c in changed if c not in planned]
        if planned and outside:
            warnings.append(
                "displaced fix: the attempt changed files outside the diagnosis' proposed fix: "
                + ", ".join(outside[:20])
            )
        if len(changed) > max(SHOTGUN_FILES, len(planned) + 2):
            warnings.append(f"shotgun fix: {len(changed)} files changed at once; change one thing at a time")
        named = set()
        for token in re.split(r"[\s;|&<>()'\"=]+", reproducer):
            if not token or token.startswith("-"):
                continue
            try:
                full = (workspace / token).resolve()
                named.add(full.relative_to(root.resolve()).as_posix())
            except (ValueError, OSError):
                continue
        tampered = [c for c in changed if c in named and c not in planned]
        if tampered:
            warnings.append(
                "the attempt changed the reproducer itself ("
                + ", ".join(tampered)
                + "), which the approved fix does not name: a pass does not count; a fix must make the "
                "unchanged reproducer pass"
            )
        return warnings, tampered

    def _three_strike_report(self, conn: sqlite3.Connection, inv: dict[str, Any], diag_id: str) -> str:
        diag = self._diagnosis(conn, diag_id)["data"]
        same = set(self._same_cause(conn, diag_id))
        attempts = [a for a in self._attempts(conn, inv["id"]) if a.diagnosis_id in same]
        lines = [
            f"# Three-strike report: investigation {inv['id']}",
            "",
            f"Symptom: {inv['symptom']}",
            f"Diagnosis {diag_id}: {diag['root_cause']}",
            f"Mechanism claimed: {diag['mechanism']}",
            "",
            "## Attempts",
        ]
        for a in attempts:
            lines += [
                "",
                f"### Attempt {a.number} ({a.id}): {a.description}",
                f"- exit code: {a.exit_code}{' (timed out)' if a.timed_out else ''}; "
                f"files changed: {', '.join(a.changed_files) or 'none'}",
            ]
            if a.warnings:
                lines.append(f"- warnings: {'; '.join(a.warnings)}")
            if a.reverted:
                lines.append(f"- reverted: {', '.join(a.reverted)}")
            if a.learned:
                lines.append(f"- learned: {a.learned}")
            lines += [
                "",
                "Diff:",
                "```diff",
                (a.diff or "(none)")[:3000],
                "```",
                "",
                "Output tail:",
                "```",
                (a.output_tail or "")[-1500:],
                "```",
            ]
        learned = [a.learned for a in attempts if a.learned]
        lines += ["", "## What was learned"]
        lines += [f"- {x}" for x in learned] or [
            "- Three changes aimed at this root cause did not make the reproducer pass: the root cause, or "
            "the reproducer's link to it, is likely wrong."
        ]
        lines += [
            "",
            "## Assumptions to re-examine",
            f"- That the root cause is: {diag['root_cause']}",
            f"- That the mechanism holds: {diag['mechanism']}",
            f"- That the cited evidence ({', '.join(diag['evidence_ids'])}) supports this cause rather than "
            "merely co-occurring with the symptom",
            f"- The disproving observation ({diag['disproving_observation']}) was "
            + ("looked for" if diag.get("disproof_looked_for") else "NOT looked for: look for it now"),
            "- That the reproducer tests the symptom itself (it may fail for another reason)",
        ]
        for alt in diag.get("alternatives_considered") or []:
            lines.append(f"- The alternative set aside: {alt}")
        lines += [
            "",
            "## Next",
            "Propose new hypotheses and submit a diagnosis with a different root cause; begin_fix stays "
            "refused until it is approved.",
        ]
        return "\n".join(lines)

    # ------------------------------------------------------------------ knowledge

    def abandonable(self, inv_id: str) -> InvestigationView:
        """The investigation a person would be asked to abandon; refuses when it cannot be."""
        with self.store.connect() as conn:
            inv = self._inv_row(conn, inv_id)
            if inv["phase"] in DONE:
                raise ProtocolError(
                    f"investigation {inv_id} is already {inv['phase']}",
                    "capture_knowledge closes a resolved investigation"
                    if inv["phase"] == RESOLVED
                    else "nothing",
                )
            if inv["phase"] == FIXING:
                raise self.refuse(
                    inv_id,
                    "a fix attempt is active: it must be verified before the investigation is abandoned",
                    "verify_fix (with revert: true to undo the attempt), then abandon",
                )
            return self._view(conn, inv)

    def abandon(
        self, inv_id: str, *, reason: str, path: str, approver: str | None, words: str | None, rca_dir: Path
    ) -> dict[str, Any]:
        """Close an unresolved investigation as abandoned, with the person's sign-off, and an RCA saying so."""
        if not reason.strip():
            raise ProtocolError("abandoning needs a reason", "fill abandon_reason")
        view = self.abandonable(inv_id)
        from trainsleuth.protocol.rca import rca_filename, render_rca

        today = dt.datetime.fromtimestamp(self.clock(), tz=dt.timezone.utc).date().isoformat()
        rca_dir.mkdir(parents=True, exist_ok=True)
        rca_path = rca_dir / rca_filename(today, view.symptom, inv_id)
        result: dict[str, Any] = {
            "rca_path": str(rca_path),
            "constraint": None,
            "fix_pattern": None,
            "abandoned": {"reason": reason, "path": path, "approver": approver, "words": words},
        }
        text = render_rca(view, [], result, None, today, abandoned_reason=reason)
        tmp = rca_path.with_suffix(".md.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(rca_path)
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            inv["data"]["knowledge"] = result
            inv["phase"] = gate.PHASE_ABANDONED
            self._event(
                conn,
                inv_id,
                "abandoned",
                gate.PHASE_ABANDONED,
                f"abandoned unresolved by {approver or 'the person'} via {path}: {reason[:300]}",
                result["abandoned"],
            )
            self._save(conn, inv)
        return result

    def capture_knowledge(
        self,
        inv_id: str,
        *,
        lessons: list[str],
        no_new_knowledge: bool,
        no_knowledge_reason: str | None,
        rca_dir: Path,
        constraint: dict[str, Any] | None,
        constraints_file: Path | None,
        fix_pattern: bool,
        fix_patterns_file: Path | None,
    ) -> dict[str, Any]:
        with self.store.connect() as conn:
            inv = self._inv_row(conn, inv_id)
            if inv["phase"] == CLOSED:
                raise ProtocolError(
                    f"investigation {inv_id} is already closed", "get_investigation shows what was captured"
                )
            if inv["phase"] != RESOLVED:
                raise self.refuse(
                    inv_id,
                    f"capture_knowledge closes a resolved investigation; {inv_id} is {inv['phase']}",
                    "a fix must pass verify_fix first: " + self.next_step(inv, conn),
                )
            view = self._view(conn, inv)
        if no_new_knowledge and (constraint or fix_pattern):
            raise ProtocolError(
                "no_new_knowledge contradicts the constraint / fix pattern asked for",
                "either set no_new_knowledge, or ask for a constraint / fix pattern",
            )
        if no_new_knowledge and not (no_knowledge_reason or "").strip():
            raise ProtocolError(
                "recording that there is no new knowledge needs a reason",
                "fill no_knowledge_reason (e.g. the cause is already constraint 12)",
            )
        if constraint and not (
            str(constraint.get("title") or "").strip() and str(constraint.get("rule") or "").strip()
        ):
            raise ProtocolError(
                "a new constraint needs a title and a rule", "fill constraint.title and constraint.rule"
            )
        from trainsleuth.protocol.rca import rca_filename, render_rca

        today = dt.datetime.fromtimestamp(self.clock(), tz=dt.timezone.utc).date().isoformat()
        rca_dir.mkdir(parents=True, exist_ok=True)
        rca_path = rca_dir / rca_filename(today, inv["symptom"], inv_id)
        resolved_diag = next((d for d in view.diagnoses if d.status == "resolved"), None)
        result: dict[str, Any] = {"rca_path": str(rca_path), "constraint": None, "fix_pattern": None}
        if constraint:
            from trainsleuth.knowledge.capture import append_constraint

            assert constraints_file is not None
            constraints_file.parent.mkdir(parents=True, exist_ok=True)
            number = append_constraint(
                constraints_file,
                title=constraint["title"],
                rule=constraint["rule"],
                details=list(constraint.get("details") or []),
                category=constraint.get("category"),
            )
            result["constraint"] = {"number": number, "file": str(constraints_file)}
        if fix_pattern:
            from trainsleuth.knowledge.capture import append_fix_pattern

            assert fix_patterns_file is not None and resolved_diag is not None
            fix_patterns_file.parent.mkdir(parents=True, exist_ok=True)
            pattern_id = append_fix_pattern(
                fix_patterns_file,
                date=today,
                symptom=inv["symptom"],
                root_cause=resolved_diag.root_cause,
                fix=resolved_diag.proposed_fix.change,
                lesson="; ".join(lessons) or resolved_diag.mechanism,
                related_constraint=result["constraint"]["number"] if result["constraint"] else None,
            )
            result["fix_pattern"] = {"id": pattern_id, "file": str(fix_patterns_file)}
        text = render_rca(view, lessons, result, no_knowledge_reason if no_new_knowledge else None, today)
        tmp = rca_path.with_suffix(".md.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(rca_path)
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            result["no_new_knowledge"] = no_knowledge_reason if no_new_knowledge else None
            result["lessons"] = lessons
            inv["data"]["knowledge"] = result
            inv["phase"] = CLOSED
            what = (
                f"no new knowledge ({no_knowledge_reason})"
                if no_new_knowledge
                else ", ".join(
                    x
                    for x in (
                        "constraint " + result["constraint"]["number"] if result["constraint"] else "",
                        "fix pattern " + result["fix_pattern"]["id"] if result["fix_pattern"] else "",
                    )
                    if x
                )
                or "RCA only"
            )
            self._event(
                conn, inv_id, "closed", CLOSED, f"knowledge captured: {rca_path.name}; {what}", result
            )
            self._save(conn, inv)
        return result

    # ------------------------------------------------------------------ views

    def _hypotheses(self, conn: sqlite3.Connection, inv_id: str) -> list[HypothesisView]:
        out = []
        for r in conn.execute(
            "SELECT * FROM hypotheses WHERE investigation_id=? ORDER BY round, rank", (inv_id,)
        ):
            data = json.loads(r["data"])
            out.append(
                HypothesisView(id=r["id"], round=r["round"], rank=r["rank"], status=r["status"], **data)
            )
        return out

    def _reviews(self, conn: sqlite3.Connection, diag_id: str) -> list[ReviewView]:
        return [
            ReviewView(
                id=r["id"],
                diagnosis_id=diag_id,
                verdict=r["verdict"],
                created_at=r["created_at"],
                **json.loads(r["data"]),
            )
            for r in conn.execute(
                "SELECT * FROM reviews WHERE diagnosis_id=? ORDER BY created_at", (diag_id,)
            )
        ]

    def _diagnosis_view(self, conn: sqlite3.Connection, d: dict[str, Any]) -> DiagnosisView:
        data = dict(d["data"])
        approval = data.pop("approval", None)
        return DiagnosisView(
            id=d["id"],
            status=d["status"],
            created_at=d["created_at"],
            approval=Approval(**approval) if approval else None,
            reviews=self._reviews(conn, d["id"]),
            failed_attempts=self._failed_attempts(conn, d["id"]),
            **data,
        )

    def _attempts(
        self, conn: sqlite3.Connection, inv_id: str, attempt_id: str | None = None
    ) -> list[AttemptView]:
        sql = "SELECT * FROM fix_attempts WHERE investigation_id=?"
        params: tuple[Any, ...] = (inv_id,)
        if attempt_id:
            sql += " AND id=?"
            params += (attempt_id,)
        out = []
        for r in conn.execute(sql + " ORDER BY created_at", params):
            data = json.loads(r["data"])
            snap = data.get("snapshot") or {}
            out.append(
                AttemptView(
                    id=r["id"],
                    diagnosis_id=r["diagnosis_id"],
                    number=r["number"],
                    description=data.get("description", ""),
                    status=r["status"],
                    created_at=r["created_at"],
                    finished_at=r["finished_at"],
                    base_head=snap.get("head"),
                    snapshot_ref=snap.get("ref"),
                    was_dirty=bool(snap.get("dirty")),
                    changed_files=data.get("changed_files") or [],
                    diff=data.get("diff"),
                    exit_code=data.get("exit_code"),
                    timed_out=bool(data.get("timed_out")),
                    output_tail=data.get("output_tail"),
                    evidence_id=data.get("evidence_id"),
                    warnings=data.get("warnings") or [],
                    reverted=data.get("reverted") or [],
                    learned=data.get("learned"),
                )
            )
        return out

    def _summary(self, conn: sqlite3.Connection, inv: dict[str, Any]) -> InvestigationSummary:
        return InvestigationSummary(
            id=inv["id"],
            symptom=inv["symptom"],
            phase=inv["phase"],
            pathway=inv["pathway"],
            workspace=inv["workspace"],
            created_at=inv["created_at"],
            updated_at=inv["updated_at"],
            next_step=self.next_step(inv, conn),
        )

    def _view(self, conn: sqlite3.Connection, inv: dict[str, Any]) -> InvestigationView:
        d = inv["data"]
        evidence = [
            EvidenceItem(
                id=r["id"],
                source=r["source"],
                summary=r["summary"],
                created_at=r["created_at"],
                data=json.loads(r["data"]),
            )
            for r in conn.execute(
                "SELECT * FROM evidence WHERE investigation_id=? ORDER BY created_at", (inv["id"],)
            )
        ]
        diagnoses = [
            self._diagnosis_view(conn, {**dict(r), "data": json.loads(r["data"])})
            for r in conn.execute(
                "SELECT * FROM diagnoses WHERE investigation_id=? ORDER BY created_at", (inv["id"],)
            )
        ]
        timeline = [
            TimelineEvent(
                seq=r["seq"],
                at=r["at"],
                at_iso=iso(r["at"]),
                kind=r["kind"],
                phase=r["phase"],
                summary=r["summary"],
                data=json.loads(r["data"]),
            )
            for r in conn.execute("SELECT * FROM events WHERE investigation_id=? ORDER BY seq", (inv["id"],))
        ]
        return InvestigationView(
            **self._summary(conn, inv).model_dump(),
            expected=d.get("expected"),
            observed=d.get("observed"),
            started_when=d.get("started_when"),
            what_changed=d.get("what_changed"),
            reproducible=d.get("reproducible") or "unknown",
            reproducer=d.get("reproducer"),
            reproducer_timeout_s=float(d.get("reproducer_timeout_s") or DEFAULT_REPRODUCER_TIMEOUT_S),
            pathway_reason=d.get("pathway_reason") or "",
            escalation=d.get("escalation"),
            suggestions=[Suggestion(**s) for s in d.get("suggestions") or []],
            current_diagnosis_id=d.get("current_diagnosis_id"),
            evidence=evidence,
            hypotheses=self._hypotheses(conn, inv["id"]),
            diagnoses=diagnoses,
            attempts=self._attempts(conn, inv["id"]),
            three_strike_report=d.get("three_strike_report"),
            knowledge=d.get("knowledge"),
            timeline=timeline,
        )

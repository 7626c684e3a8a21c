"""Phases 1-3: open an investigation, gather evidence, test ranked hypotheses one at a time.

Rules:
- the pathway is quick when the problem reproduces every time right after a known change (what
  changed, or a last-good version or commit), else full; a failed fix or 15 minutes escalate quick to full;
- an investigation that looks like an unresolved one (similar symptom, same reproducer) is linked to
  it and shares its strikes and halt, unless the person agreed to start it fresh;
- 3-5 hypotheses, each saying what would confirm and what would rule it out; one under test at a
  time; resolving one cites evidence of this investigation.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from trainsleuth.protocol import strikes, views
from trainsleuth.protocol.core import (
    DEFAULT_REPRODUCER_TIMEOUT_S,
    DIAGNOSIS,
    DONE,
    FIXING,
    HALTED,
    HYPOTHESES,
    INVESTIGATING,
    ProtocolCore,
)
from trainsleuth.protocol.ledger import ProtocolError, dumps, insert_evidence, new_id, short_id
from trainsleuth.protocol.models import (
    Approval,
    HypothesisOutcome,
    HypothesisSpec,
    HypothesisView,
    InvestigationView,
    Pathway,
    Reproducible,
    Suggestion,
)

_QUICK_BLOCKERS = re.compile(
    r"\b(intermittent\w*|sometimes|flaky|random\w*|non-?determin\w*|hangs?|hung|deadlock\w*|distributed|"
    r"multi-?node|nccl|ranks?|races?|occasional\w*|unknown|unclear)\b",
    re.IGNORECASE,
)
# "since v1.4", "after commit 3f2a9c1", "after bumping torch to 2.3": a change one can blame.
_CHANGE_WORDS = re.compile(
    r"\b(v?\d+\.\d+(?:\.\d+)?|[0-9a-f]{7,40}|commit|upgrad\w*|bump\w*|version|release|merg\w*|"
    r"updat\w*|chang\w*)\b",
    re.IGNORECASE,
)


def known_change(what_changed: str | None, last_good: str | None, started_when: str | None) -> str | None:
    if what_changed and what_changed.strip():
        return what_changed.strip()
    if last_good and last_good.strip():
        return f"whatever changed since the last good {last_good.strip()}"
    if started_when and _CHANGE_WORDS.search(started_when):
        return started_when.strip()
    return None


def choose_pathway(
    symptom: str,
    reproducible: Reproducible,
    what_changed: str | None,
    observed: str | None,
    last_good: str | None = None,
    started_when: str | None = None,
) -> tuple[Pathway, str]:
    text = " ".join(filter(None, [symptom, observed or ""]))
    if reproducible != "always":
        return "full", f"reproducible is {reproducible!r}: the full protocol applies"
    change = known_change(what_changed, last_good, started_when)
    if not change:
        return "full", (
            "no known change to blame (give what_changed, or last_good: the last version or commit that "
            "worked): the full protocol applies"
        )
    blocker = _QUICK_BLOCKERS.search(text)
    if blocker:
        return "full", f"the symptom mentions {blocker.group(0)!r}: the full protocol applies"
    return (
        "quick",
        f"reproducible every time right after a known change ({change[:120]}): the quick pathway applies",
    )


class Investigation(ProtocolCore):
    def link_candidate(self, symptom: str, reproducer: str | None) -> tuple[str, str] | None:
        """(investigation id, reason) of an unresolved investigation this one would be linked to."""
        with self._read() as conn:
            found = strikes.link_candidate_at_start(conn, symptom, reproducer)
        return (found[0]["id"], found[1]) if found else None

    def start(
        self,
        *,
        symptom: str,
        workspace: Path,
        expected: str | None = None,
        observed: str | None = None,
        started_when: str | None = None,
        what_changed: str | None = None,
        last_good: str | None = None,
        reproducible: Reproducible = "unknown",
        reproducer: str | None = None,
        reproducer_timeout_s: float = DEFAULT_REPRODUCER_TIMEOUT_S,
        pathway: Pathway | None = None,
        suggestions: list[Suggestion] | None = None,
        fresh: Approval | None = None,
    ) -> InvestigationView:
        if not symptom.strip():
            raise ProtocolError("the symptom is empty", "describe what goes wrong, in one or two sentences")
        auto_pathway, reason = choose_pathway(
            symptom, reproducible, what_changed, observed, last_good, started_when
        )
        if pathway is None:
            pathway = auto_pathway
        else:
            reason = f"pathway {pathway!r} chosen by the caller (the description suggests {auto_pathway!r})"
        inv_id = new_id("inv")
        now = self.clock()
        data: dict[str, Any] = {
            "expected": expected,
            "observed": observed,
            "started_when": started_when,
            "what_changed": what_changed,
            "last_good": last_good,
            "reproducible": reproducible,
            "reproducer": reproducer,
            "reproducer_timeout_s": reproducer_timeout_s,
            "pathway_reason": reason,
            "suggestions": [s.model_dump() for s in suggestions or []],
            "current_diagnosis_id": None,
            "problem_id": inv_id,
        }
        phase = "investigating"
        with self._tx() as conn:
            candidate = None if fresh else strikes.link_candidate_at_start(conn, symptom, reproducer)
            if candidate is not None:
                other, why = candidate
                problem = strikes.ensure_problem(conn, other["problem_id"], now)
                data["problem_id"] = problem["id"]
                data["linked"] = {"to": other["id"], "reason": why}
                n = strikes.count(conn, problem["id"], problem["epoch"])
                note = (
                    f"investigation {inv_id} is linked to {other['id']} ({why}): they are one problem and share "
                    f"its strikes ({n} of {strikes.MAX_STRIKES})"
                )
                if problem["halted"]:
                    phase = HALTED
                    report = self._inv_row(conn, other["id"])["data"].get("three_strike_report")
                    data["three_strike_report"] = report
                    note += "; the problem is halted after three failed fixes, so this one starts halted"
                self.notices.append(
                    note + ". Only the person can start it fresh (start_investigation with fresh: true)."
                )
            else:
                strikes.ensure_problem(conn, inv_id, now)
            if fresh is not None:
                data["fresh"] = fresh.model_dump()
            conn.execute(
                "INSERT INTO investigations(id, created_at, updated_at, workspace, symptom, pathway, phase, data) "
                "VALUES(?,?,?,?,?,?,?,?)",
                (inv_id, now, now, str(workspace), symptom, pathway, phase, dumps(data)),
            )
            self._event(
                conn,
                inv_id,
                "started",
                phase,
                f"investigation opened on the {pathway} pathway: {symptom[:200]}",
                {
                    "pathway": pathway,
                    "pathway_reason": reason,
                    "reproducer": reproducer,
                    "linked": data.get("linked"),
                },
            )
            if fresh is not None:
                self._event(
                    conn,
                    inv_id,
                    "started_fresh",
                    phase,
                    f"started fresh (not linked to an earlier investigation) with the agreement of "
                    f"{fresh.approver or 'the person'} via {fresh.path}",
                    fresh.model_dump(),
                )
        return self.get(inv_id)

    def record_evidence(self, inv_id: str, summary: str, data: Any, source: str = "assistant") -> str:
        if not summary.strip():
            raise ProtocolError("the evidence summary is empty", "say in one line what was observed")
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            self._escalate_if_due(conn, inv)
            if inv["phase"] in ("closed", "abandoned"):
                raise ProtocolError(
                    f"investigation {inv_id} is {inv['phase']}", "start_investigation for a new problem"
                )
            ev_id = insert_evidence(conn, inv_id, source, summary, data, inv["phase"])
            inv = self._inv_row(conn, inv_id)
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
                        short_id(conn, "h"),
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
            return [h for h in views.hypotheses(conn, inv_id) if h.round == rnd]

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
            evidence_ids = self._check_evidence(conn, inv_id, evidence_ids, "resolving a hypothesis")
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
            else:
                # Confirmed: the rest of the round need not be tested one by one any more.
                conn.execute(
                    "UPDATE hypotheses SET status='superseded' WHERE investigation_id=? AND round=? "
                    "AND status='pending'",
                    (inv_id, row["round"]),
                )
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
            hyps = {h.id: h for h in views.hypotheses(conn, inv_id)}
            return hyps[hypothesis_id], (hyps[nxt] if nxt else None)

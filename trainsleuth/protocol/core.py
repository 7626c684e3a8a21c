"""The investigation state machine's plumbing: sealed transactions, audited refusals, next steps.

Each phase's rules live in their own module (`investigate.py`, `diagnose.py`, `fixing.py`,
`closing.py`); `machine.Protocol` puts them together. Phases (stored in `investigations.phase`, read by
the edit gate in `gate.py`):

    investigating -> hypotheses -> diagnosis -> approved -> fixing -> resolved -> closed
                                      ^            |  ^        |
                                      |  rejected / |  strike (1-2) / halted after 3 strikes
                                      +-- sent back +----------+

Every refusal raises `ProtocolError(message, next_step)` and is written to the timeline, so the audit
trail shows attempts to skip a gate as well as every transition. Every read and write checks the
state's seal first (`ledger.sealed_read` / `sealed_tx`).
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trainsleuth.protocol import gate, next_steps, strikes, views, working
from trainsleuth.protocol.ledger import (
    ProtocolError,
    StateAltered,
    dumps,
    ensure_schema,
    sealed_read,
    sealed_tx,
)
from trainsleuth.protocol.models import (
    AttemptView,
    DiagnosisView,
    InvestigationSummary,
    InvestigationView,
    Suggestion,
)
from trainsleuth.state.store import Store

CONFIDENCE_NEEDS_REVIEW = 0.8
MAX_STRIKES = strikes.MAX_STRIKES
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
ABANDONED = gate.PHASE_ABANDONED
DONE = gate.DONE_PHASES


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, tz=dt.timezone.utc).isoformat(timespec="seconds")


class ProtocolCore:
    """All protocol operations on one state store. Each operation is one sealed write transaction."""

    def __init__(
        self,
        store: Store,
        clock: Callable[[], float] = time.time,
        *,
        default_interpreter: Path | None = None,
        outside_waits: Callable[[float], Iterable[working.Span]] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        # Waits kept outside the protocol's state since a time (jobs in the background): not working time.
        self.outside_waits = outside_waits
        self._depth = 0
        # The project's Python (its environment is fingerprinted with the reproducer's).
        self.default_interpreter = default_interpreter
        # Protocol changes made during this object's calls that the caller should announce.
        self.notices: list[str] = []
        ensure_schema(store)

    @property
    def state_dir(self) -> Path:
        """Where temporary git indexes and locks go: beside the state, outside the workspace."""
        return self.store.path.parent

    # ------------------------------------------------------------------ transactions and refusals

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """A sealed write transaction; a refusal raised inside it is audited after the rollback."""
        self._depth += 1
        try:
            with sealed_tx(self.store) as conn:
                yield conn
        except StateAltered:
            raise
        except ProtocolError as exc:
            inv_id = getattr(exc, "audit_investigation", None)
            if inv_id and self._depth == 1:
                self._audit_refusal(inv_id, exc.message, exc.next_step or "")
            raise
        finally:
            self._depth -= 1

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with sealed_read(self.store) as conn:
            yield conn

    def _audit_refusal(self, inv_id: str, message: str, next_step: str) -> None:
        try:
            with sealed_tx(self.store) as conn:
                row = conn.execute("SELECT phase FROM investigations WHERE id=?", (inv_id,)).fetchone()
                if row is not None:
                    self._event(
                        conn, inv_id, "refused", row["phase"], message[:500], {"next_step": next_step}
                    )
        except (sqlite3.Error, ProtocolError):
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

    # ------------------------------------------------------------------ settings

    def setting(self, key: str, default: str | None = None) -> str | None:
        """A workspace setting from the sealed state (approval policy, RCA folder)."""
        from trainsleuth.protocol.approvals import get_setting

        with self._read() as conn:
            return get_setting(conn, key, default)

    def set_setting(self, key: str, value: str | None) -> None:
        from trainsleuth.protocol.approvals import set_setting

        with self._tx() as conn:
            set_setting(conn, key, value)

    # ------------------------------------------------------------------ the person's requests

    def open_request(self, purpose: str, inv_id: str, target: str, text: str, shown_on: str) -> str:
        """Record a decision the person must make (see approvals.py); returns its one-time code."""
        from trainsleuth.protocol import approvals

        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            request_id, code = approvals.issue(conn, purpose, inv_id, target, text, shown_on)
            self._event(
                conn, inv_id, "person_asked", inv["phase"],
                f"the person is asked to decide '{purpose}' of {target} (request {request_id}); code shown on "
                f"{shown_on}",
                {"purpose": purpose, "target": target, "request_id": request_id, "shown_on": shown_on},
            )  # fmt: skip
        return code

    def redeem_code(self, purpose: str, inv_id: str, target: str, code: str) -> str:
        """Use up the code for this decision and return where it was shown; refuses (and counts the try)
        when it is not the live one."""
        from trainsleuth.protocol import approvals

        with self._tx() as conn:
            problem, shown_on = approvals.redeem(conn, purpose, inv_id, target, code)
            inv = self._inv_row(conn, inv_id)
            self._event(
                conn, inv_id, "code_refused" if problem else "code_accepted", inv["phase"],
                f"one-time code for '{purpose}' of {target}: {problem or 'accepted'}",
                {"purpose": purpose, "target": target},
            )  # fmt: skip
        if problem:
            raise ProtocolError(
                problem,
                "ask the person for the code the server showed them, or to run `trainsleuth approve` in their own "
                "terminal (calling again without a code shows a new one)",
            )
        return shown_on

    def take_terminal_decision(self, purpose: str, inv_id: str, target: str) -> Any:
        """The person's decision on this request made with `trainsleuth approve`, if any (used up)."""
        from trainsleuth.protocol import approvals

        with self._tx() as conn:
            return approvals.take_decision(conn, purpose, inv_id, target)

    def wait_terminal_decision(self, purpose: str, inv_id: str, target: str, wait_s: float) -> Any:
        """Like take_terminal_decision, but while the person's request is still pending, wait up to wait_s
        for their answer: the assistant would otherwise sleep blind and ask again."""
        from trainsleuth.protocol import approvals

        deadline = time.monotonic() + max(0.0, wait_s)
        while True:
            decided = self.take_terminal_decision(purpose, inv_id, target)
            if decided is not None or time.monotonic() >= deadline:
                return decided
            with self._read() as conn:
                if not approvals.is_pending(conn, purpose, inv_id, target):
                    return None
            time.sleep(min(1.0, max(0.05, deadline - time.monotonic())))

    def pending_requests(self) -> list[Any]:
        from trainsleuth.protocol import approvals

        with self._read() as conn:
            return approvals.pending(conn)

    def decide_request(
        self, request_id: str, decision: str, by: str, words: str | None, channel: str
    ) -> None:
        """Record the person's decision on a request, typed in their own terminal."""
        from trainsleuth.protocol import approvals

        with self._tx() as conn:
            row = conn.execute("SELECT * FROM person_requests WHERE id=?", (request_id,)).fetchone()
            if row is None or row["status"] != "pending":
                raise ProtocolError(f"request {request_id} is not pending", "run trainsleuth approve again")
            approvals.decide_in_terminal(conn, request_id, decision, by, words, channel)
            inv = self._inv_row(conn, row["investigation_id"])
            self._event(
                conn, inv["id"], "person_decided", inv["phase"],
                f"{by} decided '{decision}' on '{row['purpose']}' of {row['target']} in their terminal ({channel})",
                {"request_id": request_id, "decision": decision, "by": by, "channel": channel},
            )  # fmt: skip

    # ------------------------------------------------------------------ rows

    def _inv_row(self, conn: sqlite3.Connection, inv_id: str) -> dict[str, Any]:
        row = conn.execute("SELECT * FROM investigations WHERE id = ?", (inv_id,)).fetchone()
        if row is None:
            raise ProtocolError(
                f"investigation {inv_id!r} does not exist in this workspace",
                "call list_investigations to see the open ones, or start_investigation to open one",
            )
        inv = dict(row)
        inv["data"] = json.loads(inv["data"])
        inv["data"].setdefault("problem_id", inv["id"])
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
        conn.execute(
            "INSERT INTO events(investigation_id, at, kind, phase, summary, data) VALUES(?,?,?,?,?,?)",
            (inv_id, self.clock(), kind, phase, summary, dumps(data or {})),
        )

    def _save(self, conn: sqlite3.Connection, inv: dict[str, Any]) -> None:
        inv["updated_at"] = self.clock()
        conn.execute(
            "UPDATE investigations SET updated_at=?, phase=?, pathway=?, data=? WHERE id=?",
            (inv["updated_at"], inv["phase"], inv["pathway"], dumps(inv["data"]), inv["id"]),
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

    def _evidence_ids(self, conn: sqlite3.Connection, inv_id: str) -> set[str]:
        return {r["id"] for r in conn.execute("SELECT id FROM evidence WHERE investigation_id=?", (inv_id,))}

    def _check_evidence(self, conn: sqlite3.Connection, inv_id: str, ids: list[str], what: str) -> list[str]:
        """The cited ids, normalised (E3 -> e3); refused when none is given or one is not this investigation's."""
        if not ids:
            raise self.refuse(
                inv_id,
                f"{what} must cite at least one evidence id",
                "gather evidence first (every analysis tool's result is recorded on the open investigation; "
                "record_evidence for what you observed yourself) and cite its ids",
            )
        known = self._evidence_ids(conn, inv_id)
        cited = [e if e in known else e.strip().lower() for e in ids]
        missing = [e for e in cited if e not in known]
        if missing:
            raise self.refuse(
                inv_id,
                f"{what} cites evidence that does not exist on investigation {inv_id}: {', '.join(missing)}",
                "cite ids returned by record_evidence or by analysis tools on this investigation "
                "(get_investigation lists them)",
            )
        return cited

    def changed_since_reproduction(self, ddata: dict[str, Any], workspace: Path) -> list[str]:
        """What changed since the server's reproducer run for this diagnosis (run outputs set aside)."""
        from trainsleuth.protocol import fingerprint

        fp = fingerprint.Fingerprint.from_dict(ddata["fingerprint"])
        outputs = set((ddata.get("reproduction") or {}).get("outputs") or [])
        interpreters = [Path(p) for p in fp.interpreters]
        try:
            now = fingerprint.take(workspace, self.state_dir, interpreters)
            found = fingerprint.changes(fp, now)
        except fingerprint.FingerprintError as exc:
            return [f"(cannot compare: {exc})"]
        return [c.describe() for c in found if c.path not in outputs]

    # ------------------------------------------------------------------ escalation

    def _escalate_if_due(
        self, conn: sqlite3.Connection, inv: dict[str, Any], reason: str | None = None
    ) -> bool:
        if inv["pathway"] != "quick" or inv["phase"] in DONE:
            return False
        if reason is None:
            worked = self.working_seconds(conn, inv)
            if worked < QUICK_PATH_LIMIT_S:
                return False
            age = self.clock() - inv["created_at"]
            reason = (
                f"{int(worked // 60)} minutes of work without a resolution on the quick pathway ({int(age // 60)} "
                "minutes in all; time waiting on the server's runs, jobs and the person is not counted)"
            )
        inv["pathway"] = "full"
        self.notices.append(
            f"investigation {inv['id']} switched from the quick pathway to the full protocol: {reason}; "
            "a new diagnosis now needs ranked hypotheses, tested one at a time (or evidence that settles the "
            "question: a bisect and a finding, or a localised error found by running the code)"
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

    def working_seconds(self, conn: sqlite3.Connection, inv: dict[str, Any]) -> float:
        """The assistant's working time on the investigation (see working.py)."""
        outside: list[working.Span] = []
        if self.outside_waits is not None:
            try:
                outside = list(self.outside_waits(float(inv["created_at"])))
            except Exception:  # the jobs are advisory here: never fail a protocol call over them
                outside = []
        return working.working_seconds(conn, inv, self.clock(), outside)

    # ------------------------------------------------------------------ next steps

    def next_step(self, inv: dict[str, Any], conn: sqlite3.Connection) -> str:
        """What to do now, derived from the state (never a step that is already done)."""
        return self.next_move(inv, conn)[1]

    def next_move(self, inv: dict[str, Any], conn: sqlite3.Connection) -> tuple[str, str]:
        """(key in next_steps.NEXT_STEPS, text) of what to do now (a step its gate accepts in this state)."""
        return next_steps.next_move(
            conn, inv, self._current_diagnosis(conn, inv), self._active_attempt_data(conn, inv)
        )

    def next_move_of(self, inv_id: str) -> tuple[str, str]:
        """(key, text) of the investigation's next step as the state stands (no escalation check)."""
        with self._read() as conn:
            return self.next_move(self._inv_row(conn, inv_id), conn)

    # ------------------------------------------------------------------ views

    def _strikes(self, conn: sqlite3.Connection, inv: dict[str, Any]) -> int:
        problem = strikes.ensure_problem(conn, inv["data"]["problem_id"], inv["created_at"])
        return strikes.count(conn, problem["id"], problem["epoch"])

    def _diagnosis_view(self, conn: sqlite3.Connection, d: dict[str, Any]) -> DiagnosisView:
        inv = self._inv_row(conn, d["investigation_id"])
        return views.diagnosis_view(conn, d, self._strikes(conn, inv))

    def _active_attempt_data(self, conn: sqlite3.Connection, inv: dict[str, Any]) -> dict[str, Any]:
        """The record of the investigation's active fix attempt ({} when there is none)."""
        attempt_id = inv["data"].get("active_attempt_id")
        row = (
            conn.execute("SELECT data FROM fix_attempts WHERE id=?", (attempt_id,)).fetchone()
            if attempt_id
            else None
        )
        return dict(json.loads(row["data"])) if row is not None else {}

    def _after_approval(self, inv_id: str, change: str) -> None:
        """Hook: what follows an approved diagnosis (the fixing phase begins the first attempt)."""

    def _attempts(
        self, conn: sqlite3.Connection, inv_id: str, attempt_id: str | None = None
    ) -> list[AttemptView]:
        return views.attempts(conn, inv_id, attempt_id)

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
        n = self._strikes(conn, inv)
        diagnoses = [
            views.diagnosis_view(conn, {**dict(r), "data": json.loads(r["data"])}, n)
            for r in conn.execute(
                "SELECT * FROM diagnoses WHERE investigation_id=? ORDER BY created_at", (inv["id"],)
            )
        ]
        return InvestigationView(
            **self._summary(conn, inv).model_dump(),
            expected=d.get("expected"),
            observed=d.get("observed"),
            started_when=d.get("started_when"),
            what_changed=d.get("what_changed"),
            last_good=d.get("last_good"),
            reproducible=d.get("reproducible") or "unknown",
            reproducer=d.get("reproducer"),
            reproducer_timeout_s=float(d.get("reproducer_timeout_s") or DEFAULT_REPRODUCER_TIMEOUT_S),
            pathway_reason=d.get("pathway_reason") or "",
            escalation=d.get("escalation"),
            suggestions=[Suggestion(**s) for s in d.get("suggestions") or []],
            current_diagnosis_id=d.get("current_diagnosis_id"),
            evidence=views.evidence(conn, inv["id"]),
            hypotheses=views.hypotheses(conn, inv["id"]),
            diagnoses=diagnoses,
            attempts=views.attempts(conn, inv["id"]),
            three_strike_report=d.get("three_strike_report"),
            problem_id=d.get("problem_id"),
            linked=d.get("linked"),
            strikes=n,
            knowledge=d.get("knowledge"),
            timeline=views.timeline(conn, inv["id"], iso),
        )

    def get(self, inv_id: str) -> InvestigationView:
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            self._escalate_if_due(conn, inv)
            view = self._view(conn, inv)
        from trainsleuth.protocol.snapshot import list_refs

        view.snapshot_refs = list_refs(Path(view.workspace), f"{inv_id}/")
        return view

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

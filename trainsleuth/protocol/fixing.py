"""Phase 5: one fix attempt at a time, verified by the server, three strikes and stop.

Rules:
- `begin_fix` needs an approved diagnosis of a problem that is not halted; it snapshots HEAD and the
  uncommitted changes without touching them (the edit gate opens while the attempt is active);
- `verify_fix` runs one at a time per investigation (a second concurrent call is refused);
- it resolves only when the approved reproducer, run by the server, passes now *and* nothing it can
  reach changed since it failed on the unfixed tree except the files the approved fix names. A pass
  with other changes is not a resolution: the attempt stays open and names each file, to be undone or
  approved by the person as an amendment;
- a failing run is a strike on the problem (`revert` undoes only what the attempt changed); an attempt
  that repeats the diff of one that failed under a struck-out diagnosis halts at once; three strikes
  halt every open investigation of the problem with a three-strike report;
- snapshot refs are removed as soon as they are not needed.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trainsleuth.protocol import next_steps, strikes
from trainsleuth.protocol.core import (
    APPROVED,
    DEFAULT_REPRODUCER_TIMEOUT_S,
    FIXING,
    HALTED,
    MAX_STRIKES,
    RESOLVED,
    SHOTGUN_FILES,
    ProtocolCore,
)
from trainsleuth.protocol.diagnose import repo_relative
from trainsleuth.protocol.ledger import ProtocolError, dumps, insert_evidence, short_id
from trainsleuth.protocol.models import AttemptView, InvestigationView
from trainsleuth.protocol.reproducer import run_reproducer

_VERIFYING: dict[str, threading.Lock] = {}
_VERIFYING_GUARD = threading.Lock()


@contextmanager
def verify_lock(state_dir: Path, inv_id: str) -> Iterator[bool]:
    """Hold the investigation's verify lock (this process and every other); yields False when busy."""
    with _VERIFYING_GUARD:
        lock = _VERIFYING.setdefault(inv_id, threading.Lock())
    if not lock.acquire(blocking=False):
        yield False
        return
    handle = None
    try:
        try:
            import fcntl

            folder = state_dir / "locks"
            folder.mkdir(parents=True, exist_ok=True)
            handle = open(folder / f"verify-{inv_id}.lock", "w")  # noqa: SIM115 (held across the yield)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield False
                return
        except ImportError:  # no fcntl (Windows): the in-process lock still serialises this server
            pass
        yield True
    finally:
        if handle is not None:
            handle.close()  # releases the flock (also when the process dies)
        lock.release()


class Fixing(ProtocolCore):
    def begin_fix(self, inv_id: str, description: str, auto: bool = False) -> AttemptView:
        """Start one fix attempt: the tree is snapshotted so the attempt's diff can be judged and reverted.
        Approval begins the first attempt by itself (`auto`); a begin_fix on that untouched attempt only
        renames it, so an assistant that calls it anyway loses nothing."""
        from trainsleuth.protocol.snapshot import SnapshotError, take_snapshot

        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            self._escalate_if_due(conn, inv)
        with self._read() as conn:
            inv = self._inv_row(conn, inv_id)
            diag = self._current_diagnosis(conn, inv)
            phase = inv["phase"]
            problem = strikes.ensure_problem(conn, inv["data"]["problem_id"], inv["created_at"])
            if phase == FIXING:
                if self._active_attempt_data(conn, inv).get("auto") and description.strip():
                    return self._rename_auto_attempt(inv_id, inv["data"]["active_attempt_id"], description)
                raise self.refuse(
                    inv_id, "a fix attempt is already active", "verify_fix it first (one change at a time)"
                )
            awaiting = diag is not None and diag["status"] in ("awaiting_review", "awaiting_approval")
            if not awaiting and (
                phase == HALTED or problem["halted"] or (diag is not None and diag["status"] == "struck_out")
            ):
                report = inv["data"].get("three_strike_report") or ""
                raise self.refuse(
                    inv_id,
                    "begin_fix is refused: three fix attempts failed on this problem (three strikes). A new "
                    "diagnosis with a different root cause must be approved first.\n\n" + report[:6000],
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
            if not diag["data"].get("fingerprint"):
                raise self.refuse(
                    inv_id,
                    f"diagnosis {diag['id']} was approved by an older trainsleuth, without the server running its "
                    "reproducer on the unfixed tree",
                    "submit_diagnosis again and get it approved",
                )
            if next_steps.fix_needs_hypotheses(conn, inv, diag):
                raise self.refuse(
                    inv_id,
                    "the investigation escalated to the full protocol: begin_fix needs ranked hypotheses first",
                    "propose_hypotheses (3-5, ranked) and test them before another fix attempt",
                )
            number = (
                conn.execute(
                    "SELECT COUNT(*) AS n FROM fix_attempts WHERE json_extract(data, '$.problem_id') = ? "
                    "AND json_extract(data, '$.epoch') = ?",
                    (problem["id"], problem["epoch"]),
                ).fetchone()["n"]
                + 1
            )
            workspace = Path(inv["workspace"])
        if not description.strip():
            raise ProtocolError("describe the one change this attempt makes", "fill description")
        token = os.urandom(4).hex()
        try:
            snap = take_snapshot(workspace, self.state_dir, f"{inv_id}/attempt-{token}/before")
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
            attempt_id = short_id(conn, "a")
            data = {
                "description": description,
                "snapshot": snap.to_dict(),
                "problem_id": problem["id"],
                "epoch": problem["epoch"],
                "token": token,
                "auto": auto,
            }
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

    def _after_approval(self, inv_id: str, change: str) -> None:
        try:
            self.begin_fix(inv_id, f"the approved fix: {change}"[:500], auto=True)
        except ProtocolError:
            pass  # e.g. no git repository: begin_fix, called by hand, explains why

    def _rename_auto_attempt(self, inv_id: str, attempt_id: str, description: str) -> AttemptView:
        with self._tx() as conn:
            row = conn.execute("SELECT data FROM fix_attempts WHERE id=?", (attempt_id,)).fetchone()
            adata = json.loads(row["data"])
            adata["description"] = description
            adata["auto"] = False  # the assistant's own now: a second begin_fix is refused as usual
            conn.execute("UPDATE fix_attempts SET data=? WHERE id=?", (dumps(adata), attempt_id))
            return self._attempts(conn, inv_id, attempt_id)[0]

    def verify_fix(
        self,
        inv_id: str,
        *,
        timeout_s: float | None,
        revert: bool,
        learned: str | None,
        cancel_event: threading.Event | None = None,
    ) -> tuple[AttemptView, InvestigationView]:
        with verify_lock(self.state_dir, inv_id) as free:
            if not free:
                raise self.refuse(
                    inv_id,
                    "a verify_fix of this investigation is already running; verifications run one at a time",
                    "wait for it to finish, then get_investigation",
                )
            return self._verify(
                inv_id, timeout_s=timeout_s, revert=revert, learned=learned, cancel_event=cancel_event
            )

    def _verify(
        self,
        inv_id: str,
        *,
        timeout_s: float | None,
        revert: bool,
        learned: str | None,
        cancel_event: threading.Event | None,
    ) -> tuple[AttemptView, InvestigationView]:
        from trainsleuth.protocol.snapshot import (
            Snapshot,
            SnapshotError,
            delete_refs,
            diff_changes,
            diff_text,
            restore_files,
            take_snapshot,
        )

        with self._read() as conn:
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
        ddata = diag["data"]
        if not ddata.get("fingerprint"):
            raise self.refuse(
                inv_id, "the approved diagnosis has no recorded reproducer run", "submit_diagnosis again"
            )
        before = Snapshot.from_dict(adata["snapshot"])
        workspace = Path(inv["workspace"])
        root = Path(before.repo_root)
        token = adata.get("token") or attempt_id
        try:
            after = take_snapshot(workspace, self.state_dir, f"{inv_id}/attempt-{token}/after")
            changes = diff_changes(before, after)
            diff = diff_text(before, after)
        except SnapshotError as exc:
            raise ProtocolError(
                f"cannot record the attempt's changes: {exc}", "check the git repository"
            ) from exc
        changed = [c.path for c in changes]
        approved = repo_relative(ddata["proposed_fix"]["files"], workspace, root)
        approved |= set(ddata["proposed_fix"]["files"])
        outputs = set((ddata.get("reproduction") or {}).get("outputs") or [])
        unapproved = [
            c
            for c in self.changed_since_reproduction(ddata, workspace)
            if c not in approved and c not in outputs
        ]
        warnings = self._fix_warnings(changed, approved)
        command = ddata["reproducer"]
        limit = timeout_s or float(ddata.get("reproducer_timeout_s") or DEFAULT_REPRODUCER_TIMEOUT_S)
        run = run_reproducer(command, workspace, limit, cancel_event)
        pending = run.passed and bool(unapproved)
        passed = run.passed and not unapproved
        if unapproved:
            warnings.append(
                "changed outside the approved fix (the approved fix names "
                + ", ".join(sorted(ddata["proposed_fix"]["files"])[:10])
                + "): "
                + ", ".join(unapproved[:20])
                + (
                    "; the reproducer passes, but that does not count until the change is undone or the person "
                    "approves it (approve_diagnosis)"
                    if pending
                    else ""
                )
            )
        reverted: list[str] = []
        if revert and not run.passed:
            res = restore_files(before, after)
            reverted = res.restored + res.removed
            if res.skipped:
                warnings.append(f"left alone (changed again while verifying): {', '.join(res.skipped)}")
        elif revert and run.passed:
            warnings.append("revert was requested but the reproducer passed: nothing was reverted")
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            problem = strikes.ensure_problem(conn, inv["data"]["problem_id"], inv["created_at"])
            signature = strikes.diff_signature(diff)
            repeats = None
            repeat_epoch = None
            if not run.passed and signature:
                for r in conn.execute(
                    "SELECT id, data FROM fix_attempts WHERE status='failed' AND json_extract(data,'$.problem_id')=? "
                    "AND json_extract(data,'$.diff_signature')=? ORDER BY created_at",
                    (problem["id"], signature),
                ):
                    repeats, repeat_epoch = r["id"], json.loads(r["data"]).get("epoch")
                    break
                if repeats:
                    warnings.append(
                        f"this attempt repeats the change of attempt {repeats}, which already failed"
                    )
            if passed:
                verdict = "passed"
            elif pending:
                verdict = "passed, but files outside the approved fix changed: not resolved"
            else:
                verdict = run.verdict()
            summary = f"verify_fix attempt {row['number']}: reproducer {verdict}"
            ev_id = insert_evidence(
                conn,
                inv_id,
                "verify_fix",
                summary,
                {"command": command, "exit_code": run.exit_code, "timed_out": run.timed_out,
                 "output_tail": run.output_tail, "attempt_id": attempt_id, "changed_files": changed,
                 "unapproved": unapproved},
                inv["phase"],
            )  # fmt: skip
            adata.update(
                {
                    "after": after.to_dict(),
                    "changed_files": changed,
                    "diff": diff,
                    "diff_signature": signature,
                    "exit_code": run.exit_code,
                    "timed_out": run.timed_out,
                    "output_tail": run.output_tail,
                    "evidence_id": ev_id,
                    "warnings": warnings,
                    "reverted": reverted,
                    "learned": learned,
                    "unapproved": unapproved if pending else [],
                    "outside_fix": unapproved,
                    "repeats": repeats,
                }
            )
            if pending:
                conn.execute("UPDATE fix_attempts SET data=? WHERE id=?", (dumps(adata), attempt_id))
                self._event(
                    conn, inv_id, "not_resolved", FIXING,
                    f"attempt {row['number']}: the reproducer passes, but {', '.join(unapproved[:5])} changed outside "
                    "the approved fix",
                    {"attempt_id": attempt_id, "unapproved": unapproved, "evidence_id": ev_id},
                )  # fmt: skip
            else:
                status = "passed" if passed else "failed"
                conn.execute(
                    "UPDATE fix_attempts SET status=?, finished_at=?, data=? WHERE id=?",
                    (status, self.clock(), dumps(adata), attempt_id),
                )
                inv["data"]["active_attempt_id"] = None
                if passed:
                    self._set_diag_status(conn, diag["id"], "resolved")
                    inv["phase"] = RESOLVED
                    self._event(
                        conn, inv_id, "resolved", RESOLVED,
                        f"attempt {row['number']} verified: the reproducer passed and nothing outside the approved "
                        "fix changed",
                        {"attempt_id": attempt_id, "evidence_id": ev_id},
                    )  # fmt: skip
                else:
                    self._strike(
                        conn, inv, diag, problem, row["number"], attempt_id, reverted, repeats, repeat_epoch
                    )
            self._save(conn, inv)
            attempt = self._attempts(conn, inv_id, attempt_id)[0]
            view = self._view(conn, inv)
        if passed:
            delete_refs(workspace, f"{inv_id}/")
        elif not pending:
            delete_refs(workspace, f"{inv_id}/attempt-{token}/")
        else:
            delete_refs(workspace, f"{inv_id}/attempt-{token}/after")
        return attempt, view

    def _strike(
        self,
        conn: sqlite3.Connection,
        inv: dict[str, Any],
        diag: dict[str, Any],
        problem: dict[str, Any],
        number: int,
        attempt_id: str,
        reverted: list[str],
        repeats: str | None,
        repeat_epoch: int | None,
    ) -> None:
        count = strikes.count(conn, problem["id"], problem["epoch"])
        inv["phase"] = APPROVED
        self._event(
            conn, inv["id"], "strike", APPROVED,
            f"attempt {number} failed verification: strike {count} of {MAX_STRIKES} on problem {problem['id']}"
            + (f"; reverted {len(reverted)} file(s)" if reverted else ""),
            {"attempt_id": attempt_id, "strikes": count, "reverted": reverted},
        )  # fmt: skip
        if inv["pathway"] == "quick":
            self._escalate_if_due(conn, inv, reason="the first fix attempt failed")
        repeated_struck = (
            repeats is not None and repeat_epoch is not None and int(repeat_epoch) < int(problem["epoch"])
        )
        if count >= MAX_STRIKES or repeated_struck:
            why = (
                f"attempt {attempt_id} repeats the change of {repeats}, which failed under a struck-out diagnosis: "
                "the root cause has not changed"
                if repeated_struck and count < MAX_STRIKES
                else f"three failed fix attempts on problem {problem['id']}"
            )
            self._halt(conn, inv, diag, problem, why)

    def _halt(
        self,
        conn: sqlite3.Connection,
        inv: dict[str, Any],
        diag: dict[str, Any],
        problem: dict[str, Any],
        why: str,
    ) -> None:
        causes = {
            r["diagnosis_id"]
            for r in conn.execute(
                "SELECT diagnosis_id FROM fix_attempts WHERE status='failed' AND json_extract(data,'$.problem_id')=? "
                "AND json_extract(data,'$.epoch')=?",
                (problem["id"], problem["epoch"]),
            )
        } | {diag["id"]}
        struck = problem["data"].setdefault("struck", [])
        for diag_id in sorted(causes):
            d = self._diagnosis(conn, diag_id)
            struck.append(
                {
                    "diagnosis_id": diag_id,
                    "root_cause": d["data"]["root_cause"],
                    "investigation_id": d["investigation_id"],
                }
            )
        problem["halted"] = 1
        strikes.save_problem(conn, problem)
        report = self._three_strike_report(conn, inv, diag["id"], problem, why)
        for other_id in strikes.investigations_of(conn, problem["id"]):
            other = inv if other_id == inv["id"] else self._inv_row(conn, other_id)
            if other["phase"] in ("resolved", "closed", "abandoned"):
                continue
            if other is not inv and other["phase"] == FIXING:
                continue  # its active attempt is still verified; begin_fix is refused from now on
            current = self._current_diagnosis(conn, other)
            if current is not None and current["status"] in (
                "approved",
                "awaiting_approval",
                "awaiting_review",
            ):
                self._set_diag_status(conn, current["id"], "struck_out")
            other["phase"] = HALTED
            other["data"]["three_strike_report"] = report
            self._event(conn, other_id, "halted", HALTED, f"halted: {why}", {"diagnosis_id": diag["id"]})
            if other is not inv:
                self._save(conn, other)
        self._set_diag_status(conn, diag["id"], "struck_out")

    def _fix_warnings(self, changed: list[str], approved: set[str]) -> list[str]:
        warnings: list[str] = []
        if not changed:
            warnings.append("no file changed since begin_fix: the attempt changed nothing")
            return warnings
        outside = [c for c in changed if c not in approved]
        if outside:
            warnings.append(
                "displaced fix: the attempt changed files outside the diagnosis' proposed fix: "
                + ", ".join(outside[:20])
            )
        if len(changed) > max(SHOTGUN_FILES, len(approved) + 2):
            warnings.append(f"shotgun fix: {len(changed)} files changed at once; change one thing at a time")
        return warnings

    def _three_strike_report(
        self, conn: sqlite3.Connection, inv: dict[str, Any], diag_id: str, problem: dict[str, Any], why: str
    ) -> str:
        diag = self._diagnosis(conn, diag_id)["data"]
        rows = conn.execute(
            "SELECT investigation_id FROM fix_attempts WHERE json_extract(data,'$.problem_id')=? "
            "AND json_extract(data,'$.epoch')=? GROUP BY investigation_id",
            (problem["id"], problem["epoch"]),
        ).fetchall()
        attempts = [
            a
            for r in rows
            for a in self._attempts(conn, r["investigation_id"])
            if a.status == "failed"
            and json.loads(
                conn.execute("SELECT data FROM fix_attempts WHERE id=?", (a.id,)).fetchone()["data"]
            ).get("epoch")
            == problem["epoch"]
        ]
        lines = [
            f"# Three-strike report: investigation {inv['id']} (problem {problem['id']})",
            "",
            f"Why it halted: {why}",
            f"Symptom: {inv['symptom']}",
            f"Diagnosis {diag_id}: {diag['root_cause']}",
            f"Mechanism claimed: {diag['mechanism']}",
            "",
            "## Attempts",
        ]
        for a in attempts:
            lines += [
                "",
                f"### Attempt {a.number} ({a.id}, diagnosis {a.diagnosis_id}): {a.description}",
                f"- exit code: {a.exit_code}{' (timed out)' if a.timed_out else ''}; "
                f"files changed: {', '.join(a.changed_files) or 'none'}",
            ]
            if a.warnings:
                lines.append(f"- warnings: {'; '.join(a.warnings)}")
            if a.reverted:
                lines.append(f"- reverted: {', '.join(a.reverted)}")
            if a.learned:
                lines.append(f"- learned: {a.learned}")
            lines += ["", "Diff:", "```diff", (a.diff or "(none)")[:3000], "```", "", "Output tail:", "```",
                      (a.output_tail or "")[-1500:], "```"]  # fmt: skip
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
            "Propose new hypotheses and submit a diagnosis with a different root cause; begin_fix stays refused "
            "until the person approves it.",
        ]
        return "\n".join(lines)

"""Phase 4 (Gate 4), first half: the diagnosis and the server's run of its reproducer.

Rules:
- the diagnosis passes Gate 4 (`gate4.py`: evidence, disproof, fix files, reproducer, what it rests on
  on the full pathway, no struck-out root cause), every problem named in one refusal before anything runs;
- the server runs the reproducer on the unfixed tree: if it passes, the diagnosis is refused ("the
  reproducer does not reproduce"); if it fails, that run and a fingerprint of everything the reproducer
  can reach are kept with the diagnosis.

The critical review and the person's approval that follow are in `decision.py`.
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from pathlib import Path
from typing import Any

from trainsleuth.protocol import fingerprint, gate4, strikes
from trainsleuth.protocol.core import (
    CONFIDENCE_NEEDS_REVIEW,
    DEFAULT_REPRODUCER_TIMEOUT_S,
    DIAGNOSIS,
    DONE,
    FIXING,
    ProtocolCore,
)
from trainsleuth.protocol.ledger import ProtocolError, dumps, insert_evidence, short_id
from trainsleuth.protocol.models import DiagnosisSpec, DiagnosisView
from trainsleuth.protocol.reproducer import run_reproducer
from trainsleuth.protocol.snapshot import REF_PREFIX, SnapshotError, commit_tree


def repo_relative(files: list[str], workspace: Path, root: Path) -> set[str]:
    out = set()
    for f in files:
        p = Path(f)
        full = p if p.is_absolute() else workspace / p
        try:
            out.add(full.resolve().relative_to(root.resolve()).as_posix())
        except ValueError:
            out.add(p.as_posix())
    return out


class Diagnosis(ProtocolCore):
    def _interpreters(self, command: str, workspace: Path) -> list[Path]:
        return fingerprint.interpreters_for(command, workspace, self.default_interpreter)

    # ------------------------------------------------------------------ submit

    def _gate4(self, inv_id: str, draft: gate4.Draft) -> tuple[dict[str, Any], gate4.Verdict]:
        """The investigation (escalated if due) and Gate 4's verdict on `draft`; refuses a phase that takes
        no diagnosis."""
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            self._escalate_if_due(conn, inv)
            if inv["phase"] == FIXING:
                raise self.refuse(
                    inv_id, "a fix attempt is active on the approved diagnosis", "verify_fix first"
                )
            if inv["phase"] in DONE:
                raise ProtocolError(
                    f"investigation {inv_id} is {inv['phase']}", "start_investigation for a new problem"
                )
        with self._read() as conn:
            return inv, gate4.check(conn, self._inv_row(conn, inv_id), draft)

    def precheck_diagnosis(self, inv_id: str, draft: gate4.Draft) -> ProtocolError | None:
        """What submit_diagnosis would refuse before running anything (audited as that refusal), else None."""
        try:
            _, verdict = self._gate4(inv_id, draft)
        except ProtocolError as exc:
            return exc
        if verdict.problems:
            return self.refuse(inv_id, verdict.message(), verdict.next_step())
        return None

    def submit_diagnosis(
        self, inv_id: str, spec: DiagnosisSpec, cancel_event: threading.Event | None = None
    ) -> DiagnosisView:
        # Gate 4, in one pass before anything runs: every problem named in one refusal.
        inv, verdict = self._gate4(inv_id, gate4.Draft.from_spec(spec))
        if verdict.problems:
            raise self.refuse(inv_id, verdict.message(), verdict.next_step())
        workspace = Path(inv["workspace"])
        command, cited = verdict.command, verdict.cited
        hypothesis_id, settled = verdict.hypothesis_id, verdict.settled
        timeout = float(
            spec.reproducer_timeout_s
            or inv["data"].get("reproducer_timeout_s")
            or DEFAULT_REPRODUCER_TIMEOUT_S
        )
        # The server's own run on the unfixed tree, and what the reproducer could reach.
        interpreters = self._interpreters(command, workspace)
        try:
            before = fingerprint.take(workspace, self.state_dir, [], environment=False)
            run = run_reproducer(command, workspace, timeout, cancel_event)
            after = fingerprint.take(workspace, self.state_dir, interpreters)
            outputs = [
                c.path
                for c in fingerprint.changes(before, after, environment=False)
                if fingerprint.is_run_output(c.path)
            ]
        except fingerprint.FingerprintError as exc:
            raise self.refuse(
                inv_id,
                f"cannot record what the reproducer runs on: {exc}",
                "submit_diagnosis needs the workspace in a git repository (git init && git add -A && git commit "
                "-m baseline), so the tree it was tested on can be compared with the fixed one",
            ) from exc
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            summary = (
                f"the server ran the reproducer on the unfixed tree: {run.verdict()} "
                f"({run.duration_s:.1f} s): {command[:200]}"
            )
            ev_id = insert_evidence(
                conn,
                inv_id,
                "submit_diagnosis",
                summary,
                {"command": command, "exit_code": run.exit_code, "timed_out": run.timed_out,
                 "output_tail": run.output_tail},
                inv["phase"],
            )  # fmt: skip
        if run.passed:
            raise self.refuse(
                inv_id,
                f"the reproducer does not reproduce: `{command}` passed (exit code 0) on the unfixed tree "
                f"(evidence {ev_id}), so it could not tell a fix from no fix",
                "give a reproducer that fails now because of this problem (a test asserting the expected "
                "behaviour, or a script exiting non-zero on the symptom), then submit_diagnosis again",
            )
        ref = f"{REF_PREFIX}{inv_id}/reproduced-{uuid.uuid4().hex[:8]}"
        try:
            commit_tree(
                Path(after.repo_root),
                after.tree,
                None,
                ref,
                f"trainsleuth: tree the reproducer failed on ({inv_id})",
            )
        except SnapshotError as exc:
            raise ProtocolError(f"cannot keep the tested tree: {exc}", "check the git repository") from exc
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            phase = inv["phase"]
            linked = strikes.link_candidate_by_files(
                conn,
                inv_id,
                inv["data"]["problem_id"],
                sorted(repo_relative(spec.proposed_fix.files, workspace, Path(after.repo_root))),
            )
            if linked is not None:
                self._link(conn, inv, linked[0], linked[1])
            old = self._current_diagnosis(conn, inv)
            if old is not None and old["status"] in ("awaiting_review", "awaiting_approval", "approved"):
                self._set_diag_status(conn, old["id"], "superseded")
            diag_id = short_id(conn, "d")
            status = "awaiting_review" if spec.confidence < CONFIDENCE_NEEDS_REVIEW else "awaiting_approval"
            data = spec.model_dump()
            data["disproving_observation"] = verdict.disproving_observation
            if verdict.disproof_from:
                data["disproof_from"] = verdict.disproof_from
            data.update(
                {
                    "evidence_ids": cited,
                    "hypothesis_id": hypothesis_id,
                    "settled_by": settled,
                    "reproducer": command,
                    "reproducer_timeout_s": timeout,
                    "reproduction": {
                        "command": command,
                        "exit_code": run.exit_code,
                        "timed_out": run.timed_out,
                        "output_tail": run.output_tail,
                        "at": self.clock(),
                        "evidence_id": ev_id,
                        "interpreters": [str(p) for p in interpreters],
                        "outputs": outputs,
                    },
                    "fingerprint": {**after.to_dict(), "ref": ref},
                }
            )
            conn.execute(
                "INSERT INTO diagnoses(id, investigation_id, created_at, status, confidence, root_cause_key, data) "
                "VALUES(?,?,?,?,?,?,?)",
                (
                    diag_id,
                    inv_id,
                    self.clock(),
                    status,
                    spec.confidence,
                    strikes.normalise(spec.root_cause),
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
                f"{spec.root_cause[:200]}; the reproducer fails on the unfixed tree ({run.verdict()})",
                {"diagnosis_id": diag_id, "status": status, "replaced": old["id"] if old else None,
                 "settled_by": settled, "from_phase": phase},
            )  # fmt: skip
            self._save(conn, inv)
            return self._diagnosis_view(conn, self._diagnosis(conn, diag_id))

    def _link(self, conn: sqlite3.Connection, inv: dict[str, Any], problem_id: str, reason: str) -> None:
        old_problem = inv["data"]["problem_id"]
        target = strikes.ensure_problem(conn, problem_id, self.clock())
        strikes.merge_into(conn, inv["id"], old_problem, target)
        inv["data"]["problem_id"] = problem_id
        inv["data"]["linked"] = {"to": problem_id, "reason": reason}
        n = strikes.count(conn, problem_id, target["epoch"])
        note = f"investigation {inv['id']} is linked to problem {problem_id}: {reason}; strikes {n} of 3 are shared"
        self.notices.append(note)
        self._event(
            conn, inv["id"], "linked", inv["phase"], note, {"problem_id": problem_id, "reason": reason}
        )


settling_evidence = gate4.settling_evidence

__all__ = ["Diagnosis", "repo_relative", "settling_evidence"]

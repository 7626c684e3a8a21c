"""Phase 4 (Gate 4), first half: the diagnosis and the server's run of its reproducer.

Rules:
- a diagnosis cites evidence of this investigation, states what would disprove it, names the files
  of its one proposed change and the reproducer (default: the investigation's);
- on the full pathway it rests on a confirmed hypothesis, or on evidence that settles the question:
  a bisect plus a finding (cited together: when and what), or an error a tool found by running the
  user's own code that names where (a module, parameter or piece of state: an experiment on the code
  that already came back positive); not after a failed fix escalated the investigation;
- a root cause already struck out on this problem (three failed fixes) is refused, however worded;
- the server runs the reproducer on the unfixed tree: if it passes, the diagnosis is refused ("the
  reproducer does not reproduce"); if it fails, that run and a fingerprint of everything the reproducer
  can reach are kept with the diagnosis;

The critical review and the person's approval that follow are in `decision.py`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from pathlib import Path
from typing import Any

from trainsleuth.protocol import fingerprint, strikes
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

_FINDING_SEVERITIES = ("warning", "error", "critical")


def _is_bisect_verdict(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    res: dict[str, Any] = data["result"] if isinstance(data.get("result"), dict) else data
    if not isinstance(res, dict):
        return False
    if res.get("first_bad_commit"):
        return True
    return bool(res.get("first_bad_version")) and not res.get("all_fail")


def _has_finding(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    for key in ("findings", "events"):
        for item in data.get(key) or []:
            if isinstance(item, dict) and item.get("code") and item.get("severity") in _FINDING_SEVERITIES:
                return True
    return False


# Tools that run the user's own code on the problem (never the assistant's own record_evidence).
RUNTIME_SOURCES = frozenset({"probe_gradients", "check_resume", "check_distributed", "compare_precision"})
_LOCALISED_SEVERITIES = ("error", "critical")


def _localised_runtime_finding(source: str, data: Any) -> bool:
    """An error found by running the user's code that names where: a module, parameters or state."""
    if source not in RUNTIME_SOURCES or not isinstance(data, dict):
        return False
    res: dict[str, Any] = data["result"] if isinstance(data.get("result"), dict) else data
    for item in res.get("findings") or []:
        if not isinstance(item, dict) or item.get("severity") not in _LOCALISED_SEVERITIES:
            continue
        where = item.get("module") or (item.get("evidence") or {}).get("params")
        if item.get("code") and where:
            return True
    return False


def settling_evidence(conn: sqlite3.Connection, inv_id: str, cited: list[str]) -> list[str]:
    """The cited evidence ids that settle the question without hypothesis rounds, else [].

    [bisect, finding]: a first bad commit (or version) and a finding; or [runtime finding]: an error a
    tool found by running the user's code, localised to a module, parameter or piece of state."""
    rows = {
        r["id"]: (r["source"], json.loads(r["data"]))
        for r in conn.execute("SELECT id, source, data FROM evidence WHERE investigation_id=?", (inv_id,))
    }
    data = {k: v[1] for k, v in rows.items()}
    bisect = next((e for e in cited if _is_bisect_verdict(data.get(e))), None)
    finding = next((e for e in cited if e != bisect and _has_finding(data.get(e))), None)
    if bisect and finding:
        return [bisect, finding]
    runtime = next((e for e in cited if e in rows and _localised_runtime_finding(*rows[e])), None)
    return [runtime] if runtime else []


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


def _missing_pieces(spec: DiagnosisSpec, command: str) -> list[tuple[str, str]]:
    """What Gate 4 needs and the diagnosis lacks, each as (what is missing, how to fill it)."""
    out: list[tuple[str, str]] = []
    if not [e for e in spec.evidence_ids if str(e).strip()]:
        out.append(
            (
                "it cites no evidence id",
                "evidence_ids: ids from analysis tools' results (recorded on the investigation by themselves) "
                "or from record_evidence for what you observed yourself",
            )
        )
    for name in ("symptom", "root_cause", "mechanism"):
        if not str(getattr(spec, name)).strip():
            out.append((f"{name} is empty", name))
    if not spec.disproving_observation.strip():
        out.append(
            (
                "it does not state the observation that would disprove its root cause",
                "disproving_observation (and disproof_looked_for: whether you looked for it)",
            )
        )
    if not spec.proposed_fix.change.strip():
        out.append(("the proposed fix is empty", "proposed_fix.change: the one change"))
    if not [f for f in spec.proposed_fix.files if f.strip()]:
        out.append(
            (
                "the proposed fix names no files (verify_fix accepts changes only to the files the approved fix names)",
                "proposed_fix.files: the files the one change touches",
            )
        )
    if not command:
        out.append(
            (
                "it names no reproducer (a shell command, run in the workspace, that fails now and passes once fixed)",
                "reproducer (e.g. 'pytest tests/test_loss.py -x' or 'python train.py --steps 50')",
            )
        )
    return out


class Diagnosis(ProtocolCore):
    def _interpreters(self, command: str, workspace: Path) -> list[Path]:
        return fingerprint.interpreters_for(command, workspace, self.default_interpreter)

    # ------------------------------------------------------------------ submit

    def submit_diagnosis(
        self, inv_id: str, spec: DiagnosisSpec, cancel_event: threading.Event | None = None
    ) -> DiagnosisView:
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
        workspace = Path(inv["workspace"])
        # Gate 4: every missing piece named in one refusal, so a diagnosis is fixed in one more call.
        command = (spec.reproducer or inv["data"].get("reproducer") or "").strip()
        missing = _missing_pieces(spec, command)
        if missing:
            raise self.refuse(
                inv_id,
                "the diagnosis (Gate 4) is incomplete: " + "; ".join(m for m, _ in missing),
                "call submit_diagnosis again with " + "; ".join(f for _, f in missing),
            )
        with self._read() as conn:
            cited = self._check_evidence(conn, inv_id, spec.evidence_ids, "a diagnosis (Gate 4)")
        timeout = float(
            spec.reproducer_timeout_s
            or inv["data"].get("reproducer_timeout_s")
            or DEFAULT_REPRODUCER_TIMEOUT_S
        )
        with self._read() as conn:
            hypothesis_id, settled = self._foundation(conn, inv, spec, cited)
            problem = strikes.ensure_problem(conn, inv["data"]["problem_id"], inv["created_at"])
            for struck in strikes.struck_causes(problem):
                if strikes.same_root_cause(struck["root_cause"], spec.root_cause):
                    raise self.refuse(
                        inv_id,
                        f"diagnosis {struck['diagnosis_id']} with this root cause already failed three fix attempts "
                        "on this problem; a new diagnosis must name a different root cause",
                        "re-examine the assumptions in the three-strike report and diagnose a different root cause",
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

    def _foundation(
        self, conn: sqlite3.Connection, inv: dict[str, Any], spec: DiagnosisSpec, cited: list[str]
    ) -> tuple[str | None, list[str]]:
        """(confirmed hypothesis, settling evidence) the diagnosis rests on; refuses on the full pathway
        when it rests on neither."""
        hypothesis_id = spec.hypothesis_id
        if inv["pathway"] != "full":
            return hypothesis_id, []
        confirmed = [
            r["id"]
            for r in conn.execute(
                "SELECT id FROM hypotheses WHERE investigation_id=? AND status='confirmed' ORDER BY created_at DESC, rank",
                (inv["id"],),
            )
        ]
        if hypothesis_id is not None:
            if hypothesis_id not in confirmed:
                raise self.refuse(
                    inv["id"],
                    f"hypothesis {hypothesis_id} is not a confirmed hypothesis of this investigation",
                    "cite a hypothesis confirmed with resolve_hypothesis",
                )
            return hypothesis_id, []
        if confirmed:
            return confirmed[0], []
        escalation = inv["data"].get("escalation") or {}
        after_failure = "attempt failed" in str(escalation.get("reason", ""))
        settled = [] if after_failure else settling_evidence(conn, inv["id"], cited)
        if settled:
            return None, settled
        escalated = " (the investigation escalated from the quick pathway)" if escalation else ""
        raise self.refuse(
            inv["id"],
            f"the full protocol requires a confirmed hypothesis before a diagnosis{escalated}",
            "propose_hypotheses (3-5, ranked), test them one at a time and resolve_hypothesis citing evidence; "
            "then submit_diagnosis"
            + (
                ""
                if after_failure
                else " (or cite a bisect that found the first bad commit and a finding, or an error a tool found "
                "by running your code that names the module, parameter or state)"
            ),
        )

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


__all__ = ["Diagnosis", "repo_relative", "settling_evidence"]

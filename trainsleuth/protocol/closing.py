"""Phase 6: capture knowledge and close, or abandon with the person's agreement.

Rules:
- `capture_knowledge` closes a resolved investigation with a root-cause analysis; the document goes
  where the user chose (the `rca_dir` argument, else the workspace setting, else
  `WORKSPACE/.trainsleuth/rca/`, git-ignored): the user's repository is left as found unless they
  ask for the document in it;
- a new constraint and fix pattern are appended to the project's own files only when asked;
- abandoning an unresolved investigation needs the person (the caller proves it) and writes an RCA saying so;
- closing removes every snapshot ref the investigation left under `refs/trainsleuth/`;
- documents are written through a fresh temporary file in the target folder (never following a
  symlink planted at a predictable name) and renamed into place.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from pathlib import Path
from typing import Any

from trainsleuth.protocol import approvals
from trainsleuth.protocol.core import CLOSED, DONE, FIXING, RESOLVED, ProtocolCore
from trainsleuth.protocol.ledger import ProtocolError
from trainsleuth.protocol.models import Approval, InvestigationView
from trainsleuth.state.location import workspace_dir

DEFAULT_RCA_DIR = ".trainsleuth/rca"


def write_document(folder: Path, name: str, text: str) -> Path:
    """Write `folder/name` atomically without following symlinks at temporary names."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".rca-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        target = folder / name
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


class Closing(ProtocolCore):
    def rca_dir(self, workspace: Path, explicit: Path | None) -> Path:
        """Where the RCA goes: the argument, the workspace setting, or .trainsleuth/rca; always inside."""
        if explicit is not None:
            folder = Path(explicit)
        else:
            setting = self.setting(approvals.RCA_DIR)
            folder = Path(setting) if setting else Path(DEFAULT_RCA_DIR)
            if not folder.is_absolute():
                folder = workspace / folder
        real_ws = Path(os.path.realpath(workspace))
        real = Path(os.path.realpath(folder))
        if real != real_ws and real_ws not in real.parents:
            raise ProtocolError(
                f"the RCA folder {folder} resolves to {real}, outside the workspace {real_ws}",
                "pass rca_dir inside the workspace (e.g. docs/rca), or remove the symlink"
                + (
                    ", or leave rca_dir out: the RCA then goes to .trainsleuth/rca/ (git-ignored)"
                    if explicit
                    else ""
                ),
            )
        if real == Path(os.path.realpath(workspace_dir(workspace))) / "rca":
            workspace_dir(workspace).mkdir(exist_ok=True)
        return real

    def abandonable(self, inv_id: str) -> InvestigationView:
        """The investigation a person would be asked to abandon; refuses when it cannot be."""
        with self._read() as conn:
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

    def abandon(self, inv_id: str, *, reason: str, approval: Approval, rca_dir: Path) -> dict[str, Any]:
        """Close an unresolved investigation as abandoned, with the person's sign-off, and an RCA saying so."""
        from trainsleuth.protocol import gate
        from trainsleuth.protocol.rca import rca_filename, render_rca
        from trainsleuth.protocol.snapshot import delete_refs

        if not reason.strip():
            raise ProtocolError("abandoning needs a reason", "fill abandon_reason")
        view = self.abandonable(inv_id)
        today = dt.datetime.fromtimestamp(self.clock(), tz=dt.timezone.utc).date().isoformat()
        abandoned = {"reason": reason, **approval.model_dump()}
        result: dict[str, Any] = {
            "rca_path": "",
            "constraint": None,
            "fix_pattern": None,
            "abandoned": abandoned,
        }
        text = render_rca(view, [], result, None, today, abandoned_reason=reason)
        result["rca_path"] = str(write_document(rca_dir, rca_filename(today, view.symptom, inv_id), text))
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            inv["data"]["knowledge"] = result
            inv["phase"] = gate.PHASE_ABANDONED
            self._event(
                conn,
                inv_id,
                "abandoned",
                gate.PHASE_ABANDONED,
                f"abandoned unresolved by {approval.approver or 'the person'} via {approval.path}: {reason[:300]}",
                abandoned,
            )
            self._save(conn, inv)
        result["removed_refs"] = delete_refs(Path(view.workspace), f"{inv_id}/")
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
        from trainsleuth.protocol.rca import rca_filename, render_rca
        from trainsleuth.protocol.snapshot import delete_refs

        with self._read() as conn:
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
        today = dt.datetime.fromtimestamp(self.clock(), tz=dt.timezone.utc).date().isoformat()
        resolved_diag = next((d for d in view.diagnoses if d.status == "resolved"), None)
        result: dict[str, Any] = {"rca_path": "", "constraint": None, "fix_pattern": None}
        if constraint:
            from trainsleuth.knowledge.capture import append_constraint

            assert constraints_file is not None
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
        rca_path = write_document(rca_dir, rca_filename(today, inv["symptom"], inv_id), text)
        result["rca_path"] = str(rca_path)
        with self._tx() as conn:
            inv = self._inv_row(conn, inv_id)
            result["no_new_knowledge"] = no_knowledge_reason if no_new_knowledge else None
            result["lessons"] = lessons
            inv["data"]["knowledge"] = result
            inv["phase"] = CLOSED
            parts = [
                "constraint " + result["constraint"]["number"] if result["constraint"] else "",
                "fix pattern " + result["fix_pattern"]["id"] if result["fix_pattern"] else "",
            ]
            what = (
                f"no new knowledge ({no_knowledge_reason})"
                if no_new_knowledge
                else ", ".join(x for x in parts if x) or "RCA only"
            )
            self._event(
                conn, inv_id, "closed", CLOSED, f"knowledge captured: {rca_path.name}; {what}", result
            )
            self._save(conn, inv)
        result["removed_refs"] = delete_refs(Path(view.workspace), f"{inv_id}/")
        return result

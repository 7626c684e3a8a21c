"""Gate 4: what a diagnosis must hold before the server runs its reproducer, checked in one pass.

Rules (each one is published in submit_diagnosis' schema: required, or "required when ..."):
- it cites evidence of this investigation (at least one id, every id known) and states its symptom,
  root cause, mechanism, the one change and the files it touches;
- it names a reproducer, unless the investigation already has one;
- it states what would disprove it, unless it rests on a confirmed hypothesis: then that hypothesis'
  `rule_out_if` is the disproving observation (unless the diagnosis gives another);
- on the full pathway it rests on a confirmed hypothesis, or on evidence that settles the question:
  a bisect plus a finding (cited together: when and what), or an error a tool found by running the
  user's own code that names where (a module, parameter or piece of state); not after a failed fix
  escalated the investigation;
- a root cause already struck out on this problem (three failed fixes) is refused, however worded.

Every problem is collected before anything is refused, so one refusal names them all; the same check
runs on the raw arguments when the schema already refuses them (`draft_from_arguments`), so a call
missing a required field also learns what else Gate 4 lacks.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainsleuth.protocol import strikes
from trainsleuth.protocol.models import DiagnosisSpec

_FINDING_SEVERITIES = ("warning", "error", "critical")
# Tools that run the user's own code on the problem (never the assistant's own record_evidence).
RUNTIME_SOURCES = frozenset({"probe_gradients", "check_resume", "check_distributed", "compare_precision"})
_LOCALISED_SEVERITIES = ("error", "critical")

SETTLING_HINT = (
    "cite a bisect that found the first bad commit (bisect_commits or bisect_versions) together with a tool's "
    "finding, or an error a tool found by running your code (probe_gradients, check_resume, check_distributed, "
    "compare_precision) that names the module, parameter or state"
)


def _is_bisect_verdict(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    res: dict[str, Any] = data["result"] if isinstance(data.get("result"), dict) else data
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


@dataclass
class Draft:
    """What Gate 4 reads of a diagnosis: from a validated spec, or leniently from raw arguments."""

    symptom: str = ""
    root_cause: str = ""
    mechanism: str = ""
    evidence_ids: list[str] = field(default_factory=list)
    disproving_observation: str = ""
    change: str = ""
    files: list[str] = field(default_factory=list)
    reproducer: str = ""
    hypothesis_id: str | None = None

    @classmethod
    def from_spec(cls, spec: DiagnosisSpec) -> Draft:
        return cls(
            symptom=spec.symptom,
            root_cause=spec.root_cause,
            mechanism=spec.mechanism,
            evidence_ids=list(spec.evidence_ids),
            disproving_observation=spec.disproving_observation,
            change=spec.proposed_fix.change,
            files=list(spec.proposed_fix.files),
            reproducer=spec.reproducer or "",
            hypothesis_id=spec.hypothesis_id,
        )


def draft_from_arguments(raw: Mapping[str, Any]) -> Draft:
    """A Draft from submit_diagnosis' raw arguments, whatever their shape (the schema judges that)."""

    def text(value: Any) -> str:
        return value if isinstance(value, str) else ""

    def texts(value: Any) -> list[str]:
        return [str(v) for v in value] if isinstance(value, list) else []

    given_fix = raw.get("proposed_fix")
    fix: Mapping[str, Any] = given_fix if isinstance(given_fix, Mapping) else {}
    hypothesis = raw.get("hypothesis_id")
    return Draft(
        symptom=text(raw.get("symptom")),
        root_cause=text(raw.get("root_cause")),
        mechanism=text(raw.get("mechanism")),
        evidence_ids=texts(raw.get("evidence_ids")),
        disproving_observation=text(raw.get("disproving_observation")),
        change=text(fix.get("change")),
        files=texts(fix.get("files")),
        reproducer=text(raw.get("reproducer")),
        hypothesis_id=hypothesis if isinstance(hypothesis, str) and hypothesis.strip() else None,
    )


@dataclass
class Verdict:
    """Gate 4's answer: every problem (what is wrong, how to fill it), and what the diagnosis rests on."""

    problems: list[tuple[str, str]] = field(default_factory=list)
    cited: list[str] = field(default_factory=list)
    command: str = ""
    hypothesis_id: str | None = None
    settled: list[str] = field(default_factory=list)
    # The disproving observation as it will be recorded (the hypothesis' rule_out_if when none was given).
    disproving_observation: str = ""
    disproof_from: str | None = None

    def message(self) -> str:
        return "the diagnosis (Gate 4) is not accepted: " + "; ".join(what for what, _ in self.problems)

    def next_step(self) -> str:
        hows = list(dict.fromkeys(how for _, how in self.problems))
        return "fix all of these, then call submit_diagnosis again: " + "; ".join(hows)


def _confirmed(conn: sqlite3.Connection, inv_id: str) -> dict[str, dict[str, Any]]:
    """Confirmed hypotheses of the investigation, latest first (id -> its record)."""
    return {
        r["id"]: json.loads(r["data"])
        for r in conn.execute(
            "SELECT id, data FROM hypotheses WHERE investigation_id=? AND status='confirmed' "
            "ORDER BY created_at DESC, rank",
            (inv_id,),
        )
    }


def check(conn: sqlite3.Connection, inv: dict[str, Any], draft: Draft) -> Verdict:
    """Every Gate-4 problem of `draft` on investigation `inv` (a row from ProtocolCore._inv_row)."""
    inv_id = inv["id"]
    verdict = Verdict()
    problems = verdict.problems
    given = [e for e in draft.evidence_ids if e.strip()]
    if not given:
        problems.append(
            (
                "it cites no evidence id",
                "evidence_ids: ids from analysis tools' results (recorded on the investigation by themselves) "
                "or from record_evidence for what you observed yourself",
            )
        )
    known = {r["id"] for r in conn.execute("SELECT id FROM evidence WHERE investigation_id=?", (inv_id,))}
    cited = [e if e in known else e.strip().lower() for e in given]
    missing = [e for e in cited if e not in known]
    if missing:
        problems.append(
            (
                f"it cites evidence that does not exist on investigation {inv_id}: {', '.join(missing)}",
                "cite ids returned by record_evidence or by analysis tools on this investigation "
                "(get_investigation lists them)",
            )
        )
    verdict.cited = [e for e in cited if e in known]
    for name in ("symptom", "root_cause", "mechanism"):
        if not getattr(draft, name).strip():
            problems.append((f"{name} is empty", name))
    if not draft.change.strip():
        problems.append(("the proposed fix is empty", "proposed_fix.change: the one change"))
    if not [f for f in draft.files if f.strip()]:
        problems.append(
            (
                "the proposed fix names no files (verify_fix accepts changes only to the files the approved fix names)",
                "proposed_fix.files: the files the one change touches",
            )
        )
    verdict.command = (draft.reproducer or inv["data"].get("reproducer") or "").strip()
    if not verdict.command:
        problems.append(
            (
                "it names no reproducer, and the investigation has none (a shell command, run in the workspace, "
                "that fails now and passes once fixed)",
                "reproducer (e.g. 'pytest tests/test_loss.py -x' or 'python train.py --steps 50')",
            )
        )
    confirmed = _confirmed(conn, inv_id)
    _foundation(conn, inv, draft, verdict, confirmed)
    _disproof(draft, verdict, confirmed)
    problem = strikes.ensure_problem(conn, inv["data"]["problem_id"], inv["created_at"])
    for struck in strikes.struck_causes(problem):
        if draft.root_cause.strip() and strikes.same_root_cause(struck["root_cause"], draft.root_cause):
            problems.append(
                (
                    f"diagnosis {struck['diagnosis_id']} with this root cause already failed three fix attempts "
                    "on this problem; a new diagnosis must name a different root cause",
                    "re-examine the assumptions in the three-strike report and diagnose a different root cause",
                )
            )
            break
    return verdict


def _foundation(
    conn: sqlite3.Connection,
    inv: dict[str, Any],
    draft: Draft,
    verdict: Verdict,
    confirmed: dict[str, dict[str, Any]],
) -> None:
    """What the diagnosis rests on: its confirmed hypothesis, or (full pathway) settling evidence."""
    hypothesis_id = draft.hypothesis_id
    if hypothesis_id is not None and hypothesis_id not in confirmed:
        verdict.problems.append(
            (
                f"hypothesis {hypothesis_id} is not a confirmed hypothesis of this investigation",
                "cite a hypothesis confirmed with resolve_hypothesis as hypothesis_id, or leave hypothesis_id out",
            )
        )
        return
    if inv["pathway"] != "full":
        verdict.hypothesis_id = hypothesis_id
        return
    if hypothesis_id is not None or confirmed:
        verdict.hypothesis_id = hypothesis_id or next(iter(confirmed))
        return
    after_failure = after_failed_fix(inv)
    settled = [] if after_failure else settling_evidence(conn, inv["id"], verdict.cited)
    if settled:
        verdict.settled = settled
        return
    escalated = (
        " (the investigation escalated from the quick pathway)" if inv["data"].get("escalation") else ""
    )
    verdict.problems.append(
        (
            f"the full protocol requires a confirmed hypothesis before a diagnosis{escalated}"
            + (", and after a failed fix nothing else settles it" if after_failure else ""),
            "propose_hypotheses (3-5, ranked), test them one at a time and resolve_hypothesis citing evidence"
            + ("" if after_failure else f" (or {SETTLING_HINT})"),
        )
    )


def _disproof(draft: Draft, verdict: Verdict, confirmed: dict[str, dict[str, Any]]) -> None:
    """The disproving observation: the one given, else the rule_out_if of the confirmed hypothesis it rests
    on (the observation that would rule that cause out is exactly what would disprove the diagnosis)."""
    given = draft.disproving_observation.strip()
    if given:
        verdict.disproving_observation = draft.disproving_observation
        return
    rests_on = verdict.hypothesis_id or draft.hypothesis_id or next(iter(confirmed), None)
    rule_out = str((confirmed.get(rests_on or "") or {}).get("rule_out_if") or "").strip()
    if rests_on and rule_out:
        verdict.disproving_observation = rule_out
        verdict.disproof_from = rests_on
        return
    verdict.problems.append(
        (
            "it does not state the observation that would disprove its root cause (and rests on no confirmed "
            "hypothesis whose rule_out_if would)",
            "disproving_observation (and disproof_looked_for: whether you looked for it)",
        )
    )


def after_failed_fix(inv: dict[str, Any]) -> bool:
    """Whether the investigation escalated because a fix attempt failed (the obvious cause was wrong)."""
    escalation = inv["data"].get("escalation") or {}
    return "attempt failed" in str(escalation.get("reason", ""))


__all__ = [
    "RUNTIME_SOURCES",
    "SETTLING_HINT",
    "Draft",
    "Verdict",
    "after_failed_fix",
    "check",
    "draft_from_arguments",
    "settling_evidence",
]

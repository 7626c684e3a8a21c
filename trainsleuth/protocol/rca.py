"""The root-cause-analysis document written by `capture_knowledge`."""

from __future__ import annotations

import re
from typing import Any

from trainsleuth.protocol.models import InvestigationView


def slugify(text: str, limit: int = 48) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:limit].rstrip("-") or "investigation"


def rca_filename(date: str, symptom: str, inv_id: str) -> str:
    return f"{date}-{slugify(symptom)}-{inv_id.removeprefix('inv-')[:6]}.md"


def _clip(text: str | None, limit: int = 4000) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit] + "\n… [truncated]"


def render_rca(
    view: InvestigationView,
    lessons: list[str],
    captured: dict[str, Any],
    no_knowledge_reason: str | None,
    date: str,
    abandoned_reason: str | None = None,
) -> str:
    evidence = {e.id: e for e in view.evidence}
    lines = [
        f"# Root-cause analysis: {view.symptom}",
        "",
    ]
    if abandoned_reason:
        ab = captured.get("abandoned") or {}
        lines += [
            f"**Abandoned unresolved** ({ab.get('path', '')}"
            + (f", by {ab['approver']}" if ab.get("approver") else "")
            + f"): {abandoned_reason}",
            "",
        ]
    lines += [
        f"- Date: {date}",
        f"- Investigation: {view.id} ({view.pathway} pathway"
        + (f", escalated: {view.escalation['reason']}" if view.escalation else "")
        + ")",
        f"- Workspace: {view.workspace}",
        "",
        "## Problem",
        "",
        f"- Symptom: {view.symptom}",
        f"- Expected: {view.expected or 'not stated'}",
        f"- Observed: {view.observed or 'not stated'}",
        f"- Started: {view.started_when or 'not stated'}; what changed: {view.what_changed or 'not stated'}",
        f"- Reproducible: {view.reproducible}; reproducer: `{view.reproducer or 'none'}`",
        "",
        "## Root causes (ranked)",
        "",
    ]
    ranked = sorted(
        view.diagnoses,
        key=lambda d: (0 if d.status == "resolved" else 1, -d.confidence, d.created_at),
    )
    for i, d in enumerate(ranked, 1):
        lines += [
            f"### {i}. {d.root_cause} ({d.status.replace('_', ' ')}, confidence {d.confidence:.2f})",
            "",
            f"Mechanism: {d.mechanism}",
            "",
            "Evidence:",
        ]
        for ev_id in d.evidence_ids:
            ev = evidence.get(ev_id)
            lines.append(f"- {ev_id} ({ev.source}): {ev.summary}" if ev else f"- {ev_id}")
        lines.append(
            f"- Would be disproved by: {d.disproving_observation} "
            f"({'looked for' if d.disproof_looked_for else 'not looked for'}"
            + (f": {d.disproof_result}" if d.disproof_result else "")
            + ")"
        )
        if d.alternatives_considered:
            lines.append(f"- Alternatives considered: {'; '.join(d.alternatives_considered)}")
        for r in d.reviews:
            lines.append(f"- Review by {r.reviewer}: {r.verdict}: {r.reasoning}")
        if d.approval:
            lines.append(
                f"- {d.approval.decision.capitalize()}d via {d.approval.path}"
                + (f" by {d.approval.approver}" if d.approval.approver else "")
                + (f': "{d.approval.words}"' if d.approval.words else "")
            )
        lines.append("")
    ruled_out = [h for h in view.hypotheses if h.status == "ruled_out"]
    if ruled_out:
        lines += ["Hypotheses ruled out:", ""]
        lines += [f"- {h.statement} (evidence: {', '.join(h.evidence_ids)})" for h in ruled_out]
        lines.append("")
    lines += ["## Fixes", ""]
    for a in view.attempts:
        lines += [
            f"### Attempt {a.number} on {a.diagnosis_id}: {a.description} ({a.status})",
            "",
            f"Files: {', '.join(a.changed_files) or 'none'}",
        ]
        if a.warnings:
            lines.append(f"Warnings: {'; '.join(a.warnings)}")
        if a.reverted:
            lines.append(f"Reverted: {', '.join(a.reverted)}")
        lines += ["", "```diff", _clip(a.diff, 6000).rstrip(), "```", ""]
    lines += ["## Verification", ""]
    for a in view.attempts:
        lines.append(
            f"- Attempt {a.number}: `{view.reproducer}` exit code {a.exit_code}"
            + (" (timed out)" if a.timed_out else "")
            + f" -> {a.status} (evidence {a.evidence_id})"
        )
    passed = next((a for a in view.attempts if a.status == "passed"), None)
    if passed and passed.output_tail:
        lines += [
            "",
            "Output tail of the passing run:",
            "",
            "```",
            _clip(passed.output_tail, 2000).rstrip(),
            "```",
        ]
    lines += ["", "## Lessons", ""]
    lines += [f"- {x}" for x in lessons] or ["- (none recorded)"]
    lines += ["", "## Knowledge captured", ""]
    if no_knowledge_reason:
        lines.append(f"No new knowledge: {no_knowledge_reason}")
    else:
        if captured.get("constraint"):
            c = captured["constraint"]
            lines.append(f"- New constraint {c['number']} in {c['file']}")
        if captured.get("fix_pattern"):
            p = captured["fix_pattern"]
            lines.append(f"- New fix pattern {p['id']} in {p['file']}")
        if not captured.get("constraint") and not captured.get("fix_pattern"):
            lines.append("- This document only.")
    lines.append("")
    return "\n".join(lines)

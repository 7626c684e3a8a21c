"""The debugging protocol as MCP resources and prompts.

Resources: `protocol://debugging` (the protocol), `protocol://gate-4-template` (the diagnosis
template), `investigation://{investigation_id}` (one investigation, readable by any client).
Prompts: `debug_protocol` (the protocol for an assistant that does not know it) and
`critical_review` (a reviewer brief filled with one investigation's conclusion and evidence).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from trainsleuth.server.context import ServerContext

PROTOCOL_TEXT = """\
# The trainsleuth debugging protocol

Root cause first. Evidence before conclusions. One change at a time. Three strikes and stop.
The server enforces every rule below: a skipped step is refused with `isError: true` and a message
that names the missing step.

## 1. Investigate
`start_investigation` with the symptom, expected vs observed behaviour, when it started and what
changed (or `last_good`: the last version or commit that worked), whether it reproduces (always /
intermittent / no), and a reproducer: a shell command, run in the workspace, that fails now and
passes once the problem is fixed. The server picks a pathway:
- **quick**: reproducible every time right after a known change (an obvious cause);
- **full**: everything else. A quick investigation switches to the full protocol after its first
  failed fix attempt, or after 15 minutes without a resolution, and says so.
An investigation that looks like an unresolved one (similar symptom, same reproducer) is linked to
it and shares its failed fix attempts; only the person can start it fresh (`fresh: true`).
Read the checklists and constraints it suggests.

## 2. Gather evidence and compare with what works
Call analysis tools (`analyze_training_log`, `probe_gradients`, `check_distributed`,
`diff_checkpoints`, `environment_report`, `bisect_commits`, ...): while one investigation is open,
each result is stored on it as evidence by itself, with a short id (e1, e2, ...); with several
open, pass `investigation_id`. Record what you observed yourself with `record_evidence`. Compare
with a known-good commit, config, environment or run: `compare_runs` aligns a good run with the
failing one, names the first metric that leaves the good run's noise band, ranks their config and
environment differences, and offers a bisect (with a reproducer to approve) when they come from two
commits or versions; `check_resume` names what a resume from a checkpoint does not restore.

## 3. Hypotheses, one at a time (full pathway)
`propose_hypotheses`: 3-5, most likely first, each with what would confirm it and what would rule
it out. The first goes under test; `resolve_hypothesis` confirms or rules it out citing evidence
ids, and the next one goes under test. A diagnosis on the full pathway rests on a confirmed one,
or on a bisect that found the first bad commit (or version) cited together with a finding of an
analysis tool: those settle the question without hypotheses (not after a failed fix).

## 4. Gate 4: the diagnosis
`submit_diagnosis` (see `protocol://gate-4-template`): symptom, root cause, the evidence ids that
support it, mechanism, proposed fix (the files it changes and the change), the reproducer (default:
the investigation's), side effects, what it will not fix, confidence, alternatives considered, and
the observation that would disprove it and whether you looked for it. The server then runs the
reproducer on the unfixed tree: if it passes, the diagnosis is refused ("the reproducer does not
reproduce"). Its run and a fingerprint of what it can reach (the workspace's files, test
configuration even when git-ignored, the interpreters' site-packages) are kept.
- Confidence below 0.8: a critical reviewer (the `critical_review` prompt, ideally a fresh agent)
  must return CONFIRMED via `record_review` before approval. CHALLENGED or INSUFFICIENT_EVIDENCE
  sends the investigation back to hypotheses.
- A person approves with `approve_diagnosis`: clients with elicitation show the person a dialog
  (approve / reject with a comment). Without a dialog, the person decides with
  `trainsleuth approve` in their own terminal, or gives you the one-time code the server showed
  them on its terminal or a notification (never in a tool result); then call `approve_diagnosis`
  again (with `code`). A rejection needs no proof and goes back to hypotheses.

## 5. Fix, verify, and stop after three strikes
`begin_fix` (refused until a diagnosis is approved) records HEAD plus a snapshot of uncommitted
changes without touching your files. Make the one change the diagnosis proposes. `verify_fix` runs
the approved reproducer and stores its exit code, output tail and the attempt's diff as evidence.
It resolves only if the reproducer passes and nothing it can reach changed beyond the files the
approved fix names; otherwise it names each file, and the attempt stays open until the change is
undone or the person approves it (`approve_diagnosis`). A failing run is a strike (`revert: true`
restores only the files the attempt changed). Three failed attempts on one problem (across linked
investigations and reworded diagnoses) halt it with a three-strike report; `begin_fix` stays
refused until the person approves a diagnosis with a different root cause. An attempt that repeats
a failed change is recognised by its diff.

## 6. Capture knowledge
`capture_knowledge` closes a resolved investigation with a root-cause-analysis document (default
`.trainsleuth/rca/`, git-ignored; `rca_dir: docs/rca` puts it in the repository), and optionally a
new project constraint and a fix-pattern record, or an explicit record that there is no new
knowledge. Closing removes the git refs trainsleuth kept under `refs/trainsleuth/`. An unresolved
investigation can be closed only by a person: `capture_knowledge` with `abandon: true` and a reason.

State lives outside the workspace (a per-user state folder keyed by the workspace's real path,
sealed against edits), so investigations survive restarts and cannot be edited by accident;
`get_investigation` and `investigation://{id}` show the whole timestamped timeline, including how
each approval was given.
"""

GATE4_TEMPLATE = """\
# Gate 4: diagnosis template

Fill every field; `submit_diagnosis` refuses a diagnosis without cited, existing evidence ids,
without the observation that would disprove it, without the files of the fix, or whose reproducer
passes on the unfixed tree (the server runs it).

```json
{
  "investigation_id": "inv-…",
  "symptom": "What goes wrong, with numbers (e.g. loss NaN at step 3120 on rank 0)",
  "root_cause": "The single cause, stated so it could be wrong",
  "evidence_ids": ["e1", "e3"],
  "mechanism": "Why this cause produces exactly this symptom",
  "proposed_fix": {"files": ["path/in/workspace.py"], "change": "The one change"},
  "reproducer": "pytest tests/test_x.py -x (default: the investigation's; must fail now)",
  "side_effects": "What else the change affects",
  "will_not_fix": "Related problems this change does not address",
  "confidence": 0.85,
  "alternatives_considered": ["Other cause, and why the evidence speaks against it"],
  "disproving_observation": "What you would see if this root cause were wrong",
  "disproof_looked_for": true,
  "disproof_result": "What looking for it showed",
  "hypothesis_id": "h2 (full pathway: the confirmed hypothesis)"
}
```

Confidence below 0.8 needs a CONFIRMED verdict from a critical review (`record_review`) before a
person can approve it.
"""

CRITICAL_REVIEW_BRIEF = """\
You are a critical reviewer. Another engineer concluded the root cause of a training problem. Your
job is to try to break that conclusion, not to agree with it. You have no stake in it.

## Their conclusion
{diagnosis}

## The evidence on record
{evidence}

## Hypotheses tested
{hypotheses}

## What to do
1. Check that each cited evidence item actually supports the root cause rather than merely
   co-occurring with the symptom.
2. Give at least two alternative explanations that fit the same evidence, and say what
   observation would tell each apart from the stated root cause.
3. Check the mechanism: does it explain the symptom's timing, magnitude and scope?
4. Check the disproving observation: was it looked for, and what would it take to look?
5. Name any evidence that is missing before the conclusion can be trusted.

Answer with exactly one verdict:
- CONFIRMED: the evidence supports this root cause and the alternatives are ruled out;
- CHALLENGED: an alternative explains the evidence at least as well, or the mechanism fails;
- INSUFFICIENT_EVIDENCE: the conclusion may be right, but the evidence does not establish it.

Then give your reasoning, the alternative explanations, and the missing evidence. The assistant
records your answer with `record_review` (investigation_id: {investigation_id}, verdict, reviewer,
reasoning, alternative_explanations, missing_evidence).
"""

DEBUG_PROTOCOL_PROMPT = """\
You are debugging machine-learning training with trainsleuth, which enforces a root-cause-first
protocol. Do not edit code until a diagnosis is approved and `begin_fix` has been called. Follow
these steps with the trainsleuth tools; when a tool refuses, do the step it names.

{protocol}
"""


def _render_diagnosis(d: object) -> str:
    from trainsleuth.protocol.models import DiagnosisView

    assert isinstance(d, DiagnosisView)
    return "\n".join(
        [
            f"- Diagnosis {d.id} (status {d.status}, confidence {d.confidence:.2f})",
            f"- Symptom: {d.symptom}",
            f"- Root cause: {d.root_cause}",
            f"- Mechanism: {d.mechanism}",
            f"- Cited evidence: {', '.join(d.evidence_ids)}",
            f"- Proposed fix: {d.proposed_fix.change} (files: {', '.join(d.proposed_fix.files) or 'not stated'})",
            f"- Alternatives they considered: {'; '.join(d.alternatives_considered) or 'none'}",
            f"- Would be disproved by: {d.disproving_observation} "
            f"({'looked for' if d.disproof_looked_for else 'NOT looked for'}"
            + (f": {d.disproof_result}" if d.disproof_result else "")
            + ")",
        ]
    )


def critical_review_text(ctx: ServerContext, investigation_id: str) -> str:
    from trainsleuth.protocol.ledger import ProtocolError
    from trainsleuth.protocol.machine import Protocol

    try:
        view = Protocol(ctx.store).get(investigation_id)
    except ProtocolError as exc:
        return f"{exc.message}. Next step: {exc.next_step}"
    diag = next((d for d in view.diagnoses if d.id == view.current_diagnosis_id), None)
    if diag is None and view.diagnoses:
        diag = view.diagnoses[-1]
    if diag is None:
        diagnosis = f"(no diagnosis submitted yet; symptom: {view.symptom})"
    else:
        diagnosis = _render_diagnosis(diag)
    evidence = (
        "\n".join(
            f"- {e.id} [{e.source}] {e.summary}: {json.dumps(e.data, default=str)[:600]}"
            for e in view.evidence[-40:]
        )
        or "(none)"
    )
    hypotheses = (
        "\n".join(
            f"- [{h.status}] {h.statement} (evidence: {', '.join(h.evidence_ids) or '-'})"
            for h in view.hypotheses
        )
        or "(none proposed)"
    )
    return CRITICAL_REVIEW_BRIEF.format(
        diagnosis=diagnosis, evidence=evidence, hypotheses=hypotheses, investigation_id=investigation_id
    )


def register(server: MCPServer, ctx: ServerContext) -> None:
    @server.resource(
        "protocol://debugging",
        name="debugging-protocol",
        title="The debugging protocol",
        description="The protocol trainsleuth enforces, step by step, with the rules each tool applies.",
        mime_type="text/markdown",
    )
    def protocol_resource() -> str:
        return PROTOCOL_TEXT

    @server.resource(
        "protocol://gate-4-template",
        name="gate-4-template",
        title="Gate-4 diagnosis template",
        description="The fields submit_diagnosis requires, as a fill-in template.",
        mime_type="text/markdown",
    )
    def gate4_resource() -> str:
        return GATE4_TEMPLATE

    @server.resource(
        "investigation://{investigation_id}",
        name="investigation",
        title="An investigation",
        description="One investigation: phase, evidence, hypotheses, diagnoses, fix attempts and timeline.",
        mime_type="text/markdown",
    )
    def investigation_resource(investigation_id: str) -> str:
        from mcp.server.mcpserver.exceptions import ResourceNotFoundError

        from trainsleuth.protocol.ledger import ProtocolError
        from trainsleuth.protocol.machine import Protocol
        from trainsleuth.server.tools.protocol import render_investigation

        try:
            view = Protocol(ctx.store).get(investigation_id)
        except ProtocolError as exc:
            raise ResourceNotFoundError(f"{exc.message}; {exc.next_step}") from None
        return render_investigation(view)

    @server.prompt(
        name="critical_review",
        title="Critical review of a diagnosis",
        description=(
            "A reviewer brief filled with this investigation's conclusion and evidence, asking for CONFIRMED, "
            "CHALLENGED or INSUFFICIENT_EVIDENCE with alternative explanations. Give it to a fresh agent."
        ),
    )
    def critical_review(investigation_id: str) -> str:
        return critical_review_text(ctx, investigation_id)

    @server.prompt(
        name="debug_protocol",
        title="The debugging protocol",
        description="The root-cause-first protocol, for an assistant that does not know it.",
    )
    def debug_protocol() -> str:
        return DEBUG_PROTOCOL_PROMPT.format(protocol=PROTOCOL_TEXT)

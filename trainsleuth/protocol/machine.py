"""The investigation state machine: every protocol rule is enforced here (no MCP imports).

`Protocol` puts together one module per phase, each of which states its rules at its top:

- `investigate.py`: opening, evidence, ranked hypotheses tested one at a time, linking to a problem;
- `diagnose.py`: Gate 4, the diagnosis and the server's reproducer run on the unfixed tree;
- `decision.py`: Gate 4's critical review and the person's approval;
- `fixing.py`: fix attempts, verification against what the reproducer can reach, three strikes;
- `closing.py`: capturing knowledge, abandoning, removing snapshot refs;
- `core.py`: sealed transactions, audited refusals, escalation, views; `next_steps.py`: what to do now;
- `gate4.py`: what a diagnosis must hold (one pass); `working.py`: the working time escalation counts;
- `strikes.py`, `fingerprint.py`, `approvals.py`, `reproducer.py`: the mechanisms they share.
"""

from __future__ import annotations

from trainsleuth.protocol.closing import Closing
from trainsleuth.protocol.core import (
    APPROVED,
    CLOSED,
    CONFIDENCE_NEEDS_REVIEW,
    DEFAULT_REPRODUCER_TIMEOUT_S,
    DIAGNOSIS,
    DONE,
    FIXING,
    HALTED,
    HYPOTHESES,
    INVESTIGATING,
    MAX_STRIKES,
    QUICK_PATH_LIMIT_S,
    RESOLVED,
    SHOTGUN_FILES,
    iso,
)
from trainsleuth.protocol.decision import ApprovalRequest, DiagnosisDecision
from trainsleuth.protocol.diagnose import Diagnosis
from trainsleuth.protocol.fixing import Fixing
from trainsleuth.protocol.investigate import Investigation, choose_pathway
from trainsleuth.protocol.strikes import normalise as normalise_root_cause
from trainsleuth.protocol.strikes import same_root_cause


class Protocol(Investigation, Diagnosis, DiagnosisDecision, Fixing, Closing):
    """All protocol operations on one workspace's state store."""


__all__ = [
    "APPROVED",
    "CLOSED",
    "CONFIDENCE_NEEDS_REVIEW",
    "DEFAULT_REPRODUCER_TIMEOUT_S",
    "DIAGNOSIS",
    "DONE",
    "FIXING",
    "HALTED",
    "HYPOTHESES",
    "INVESTIGATING",
    "MAX_STRIKES",
    "QUICK_PATH_LIMIT_S",
    "RESOLVED",
    "SHOTGUN_FILES",
    "ApprovalRequest",
    "Protocol",
    "choose_pathway",
    "iso",
    "normalise_root_cause",
    "same_root_cause",
]

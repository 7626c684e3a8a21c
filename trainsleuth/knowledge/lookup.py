"""Suggestions for a symptom: project constraints, catalog entries and checklists ranked together.

Contract used by `start_investigation` (issue 3); implemented by the knowledge area (issue 8).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger("trainsleuth.knowledge")

SUGGEST_KINDS = {"constraint", "failure_mode", "checklist"}


def suggest_for_symptom(workspace: Path, text: str, limit: int = 5) -> list[dict[str, Any]]:
    """Best matches as dicts with keys: kind ("constraint" | "failure_mode" | "checklist"), id, title,
    pointer (file:line or resource URI), score. Never raises for a workspace without knowledge files."""
    from trainsleuth.knowledge.search import index_for

    limit = max(1, min(int(limit), 50))
    try:
        index, _ = index_for(Path(workspace))
        hits = index.search(text or "", limit=limit, kinds=SUGGEST_KINDS)
    except Exception:  # suggestions are advisory: never break start_investigation
        log.exception("knowledge suggestions failed for %s", workspace)
        return []
    return [
        {"kind": h.kind, "id": h.id, "title": h.title, "pointer": h.pointer, "score": h.score} for h in hits
    ]

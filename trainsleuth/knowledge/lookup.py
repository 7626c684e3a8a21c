"""Suggestions for a symptom: project constraints, catalog entries and checklists ranked together.

Contract used by `start_investigation` (issue 3); implemented by the knowledge area (issue 8).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def suggest_for_symptom(workspace: Path, text: str, limit: int = 5) -> list[dict[str, Any]]:
    """Best matches as dicts with keys: kind ("constraint" | "failure_mode" | "checklist"), id, title,
    pointer (file:line or resource URI), score. Never raises for a workspace without knowledge files."""
    return []

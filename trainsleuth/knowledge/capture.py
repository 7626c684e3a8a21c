"""Write knowledge back into the project's own files (constraints and fix patterns).

Contract used by the protocol's `capture_knowledge` (issue 3); implemented by the knowledge area (issue 8).
"""

from __future__ import annotations

from pathlib import Path


def append_constraint(
    constraints_file: Path, *, title: str, rule: str, details: list[str], category: str | None = None
) -> str:
    """Append a constraint in the file's own layout with the next number; return that number (e.g. "12")."""
    raise NotImplementedError("append_constraint lands with issue 8")


def append_fix_pattern(
    patterns_file: Path,
    *,
    date: str,
    symptom: str,
    root_cause: str,
    fix: str,
    lesson: str,
    related_constraint: str | None = None,
) -> str:
    """Append a fix-pattern record (Date, Symptom, Root Cause, Fix, Lesson, Related Constraint); return its id."""
    raise NotImplementedError("append_fix_pattern lands with issue 8")

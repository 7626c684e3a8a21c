"""Finding code -> failure-mode catalog ids. Light (no imports) because every analysis uses it.

Owned by the knowledge area (issue 8), which fills CODE_LINKS so every code in findings.md links
to at least one catalog entry. Analyses call `failure_modes_for(code)` when building findings.
"""

from __future__ import annotations

CODE_LINKS: dict[str, list[str]] = {}


def failure_modes_for(code: str) -> list[str]:
    return list(CODE_LINKS.get(code, []))

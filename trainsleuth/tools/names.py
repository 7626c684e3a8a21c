"""Which valid name a misspelt or misremembered one most likely meant (tools, arguments, prompts).

Standard library only, so the command line can use it without loading the server.
"""

from __future__ import annotations

import difflib

# Words assistants reach for that no spelling rule connects to the argument they meant.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "description": ("summary", "change", "statement"),
    "desc": ("summary", "description", "change"),
    "text": ("summary", "statement", "symptom"),
    "note": ("summary", "words", "learned"),
    "notes": ("summary", "words", "learned"),
    "message": ("summary", "words"),
    "hypothesis": ("statement",),
    "cause": ("root_cause",),
    "fix": ("proposed_fix", "change"),
    "cmd": ("command", "reproducer"),
    "test": ("command", "reproducer"),
    "log": ("path",),
    "logfile": ("path",),
    "file": ("path", "files"),
    "evidence": ("evidence_ids",),
    "id": ("investigation_id", "job_id"),
}


def closest(name: str, valid: list[str], n: int = 1) -> str | None:
    """The valid name a misspelt or misremembered one most likely meant."""
    found = close_names(name, valid, n)
    return found[0] if found else None


def close_names(name: str, valid: list[str], n: int = 2) -> list[str]:
    """Up to `n` valid names close to `name`: spelling first, then shared words
    ('when_started' -> 'started_when', 'alternatives' -> 'alternatives_considered')."""
    if not valid:
        return []
    lowered = {v.lower(): v for v in valid}
    if name.lower() in lowered:
        return [lowered[name.lower()]]
    meant = [lowered[m] for m in SYNONYMS.get(name.lower(), ()) if m in lowered]
    if meant:
        return meant[:n]
    found = [lowered[m] for m in difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.6)]
    ratios = sorted((difflib.SequenceMatcher(None, name.lower(), v).ratio() for v in lowered), reverse=True)
    if ratios[0] >= 0.85 and (len(ratios) < 2 or ratios[1] < 0.75):
        return found[:1]  # a plain misspelling with no close rival: one answer is clearer than two
    words = set(name.lower().replace("-", "_").split("_")) - {""}
    scored = sorted(
        ((len(words & set(v.lower().split("_"))), v) for v in valid if v not in found), key=lambda s: -s[0]
    )
    found += [v for score, v in scored if score > 0][: max(0, n - len(found))]
    if not found:
        found = [lowered[m] for m in difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.4)]
    return found[:n]

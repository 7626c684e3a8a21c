"""Suggestions for a symptom: project constraints, catalog entries and checklists ranked together.

Contract used by `start_investigation` (issue 3); implemented by the knowledge area (issue 8).
Ranking (issue 22): BM25 over the knowledge base for the symptom text, then only entries whose
domain the symptom, the repository's code and configs, or the logged metrics show (see
`knowledge.relevance`), with entries that fit the task or model family seen ranked higher.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger("trainsleuth.knowledge")

SUGGEST_KINDS = {"constraint", "failure_mode", "checklist"}
CANDIDATES = 60


def suggest_for_symptom(
    workspace: Path, text: str, limit: int = 5, *, metrics: list[str] | None = None
) -> list[dict[str, Any]]:
    """Best matches as dicts with keys: kind ("constraint" | "failure_mode" | "checklist"), id, title,
    pointer (file:line or resource URI), score, why (the signal a domain entry rests on).
    `metrics` are metric names the run's logs record, when known. Never raises for a workspace
    without knowledge files."""
    from trainsleuth.knowledge.relevance import affinity, applies, gather, topic_of
    from trainsleuth.knowledge.search import index_for, query_terms

    limit = max(1, min(int(limit), 50))
    try:
        index, _ = index_for(Path(workspace))
        hits = index.search(text or "", limit=CANDIDATES, kinds=SUGGEST_KINDS)
        signals = gather(Path(workspace), text or "", metrics)
        pairs = _bigrams(query_terms(text or ""))
        docs = {(d.kind, d.id): d for d in index.docs}
        out: list[dict[str, Any]] = []
        for h in hits:
            topic = topic_of(h.id) if h.kind == "failure_mode" else None
            ok, why = applies(h.kind, h.id, signals, topic)
            if not ok:
                continue
            out.append(
                {
                    "kind": h.kind,
                    "id": h.id,
                    "title": h.title,
                    "pointer": h.pointer,
                    "score": round(
                        h.score * affinity(h.id, signals) * _phrase_bonus(pairs, docs.get((h.kind, h.id))), 4
                    ),
                    "why": why,
                }
            )
    except Exception:  # suggestions are advisory: never break start_investigation
        log.exception("knowledge suggestions failed for %s", workspace)
        return []
    out.sort(key=lambda d: -float(d["score"]))
    return out[:limit]


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _bigrams(terms: list[str]) -> set[tuple[str, str]]:
    stems = [_stem(t) for t in terms]
    return set(itertools.pairwise(stems))


def _phrase_bonus(pairs: set[tuple[str, str]], doc: Any) -> float:
    """Phrases shared with an entry's title, symptoms and keywords count more than loose words
    ('gradient norm grows' says more than 'gradient', 'norm' and 'grows' apart)."""
    if doc is None or not pairs:
        return 1.0
    from trainsleuth.knowledge.search import query_terms

    shared = pairs & _bigrams(query_terms(f"{doc.title} {doc.keywords}"))
    return 1.0 + 0.4 * min(len(shared), 4)

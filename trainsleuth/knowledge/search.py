"""BM25 ranking of project constraints, catalog entries, checklists and fix patterns together,
with SQLite FTS5 (an in-memory index, rebuilt only when the project's knowledge files change)."""

from __future__ import annotations

import re
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

from trainsleuth.knowledge import catalog
from trainsleuth.knowledge.constraints import ProjectKnowledge, load_project

_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]*|\d+[A-Za-z]+[A-Za-z0-9]*")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "my",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "then",
        "there",
        "these",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "why",
        "with",
        "after",
        "before",
        "during",
        "does",
        "doesn",
        "do",
        "not",
        "no",
        "yes",
        "can",
        "could",
        "should",
        "would",
        "will",
        "just",
        "very",
    ]
)
MAX_QUERY_TERMS = 40
# The project's own constraints are specific to its code; they rank ahead of general catalog entries
# of similar relevance (BM25 scores of both come from the same index, so they are comparable).
CONSTRAINT_BOOST = 2.0


@dataclass
class Doc:
    kind: str  # "constraint" | "failure_mode" | "checklist" | "fix_pattern"
    id: str
    title: str
    keywords: str
    body: str
    pointer: str


@dataclass
class Hit:
    kind: str
    id: str
    title: str
    pointer: str
    score: float
    snippet: str


def query_terms(text: str) -> list[str]:
    """Lower-cased word tokens of `text`, stopwords dropped, order kept, de-duplicated."""
    seen: list[str] = []
    for tok in _TOKEN.findall(text.replace("_", " ")):
        t = tok.lower()
        if len(t) < 2 or t in _STOP or t in seen:
            continue
        seen.append(t)
    return seen[:MAX_QUERY_TERMS]


def builtin_docs() -> list[Doc]:
    docs: list[Doc] = []
    for fm in catalog.failure_modes().values():
        docs.append(
            Doc(
                kind="failure_mode",
                id=fm.id,
                title=fm.title,
                keywords=" ".join([*fm.symptoms, *fm.keywords, *fm.codes, fm.id.replace("-", " ")]),
                body=" ".join([*fm.root_causes, *(f.fix for f in fm.fixes), fm.topic]),
                pointer=fm.uri,
            )
        )
    for cl in catalog.checklists().values():
        docs.append(
            Doc(
                kind="checklist",
                id=cl.name,
                title=cl.title,
                keywords=cl.when,
                body=" ".join(f"{i.check} {i.how}" for i in cl.items),
                pointer=cl.uri,
            )
        )
    for fp in catalog.fix_patterns().values():
        docs.append(
            Doc(
                kind="fix_pattern",
                id=fp.id,
                title=fp.title,
                keywords=fp.symptom,
                body=" ".join([fp.root_cause, fp.fix, fp.lesson]),
                pointer=fp.uri,
            )
        )
    return docs


def project_docs(pk: ProjectKnowledge) -> list[Doc]:
    return [
        Doc(
            kind="constraint",
            id=e.address,
            title=e.title,
            keywords=e.category or "",
            body=e.body,
            pointer=e.pointer,
        )
        for e in pk.entries
    ]


class Index:
    """An FTS5 index over a fixed list of documents."""

    def __init__(self, docs: list[Doc]) -> None:
        self.docs = docs
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._conn.execute(
            "CREATE VIRTUAL TABLE docs USING fts5(title, keywords, body, tokenize='porter unicode61')"
        )
        self._conn.executemany(
            "INSERT INTO docs(rowid, title, keywords, body) VALUES (?, ?, ?, ?)",
            [
                (i, d.title.replace("_", " "), d.keywords.replace("_", " "), d.body.replace("_", " "))
                for i, d in enumerate(docs)
            ],
        )

    def search(self, text: str, limit: int = 10, kinds: set[str] | None = None) -> list[Hit]:
        terms = query_terms(text)
        if not terms:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        with self._lock:
            rows = self._conn.execute(
                "SELECT rowid, bm25(docs, 4.0, 2.0, 1.0) AS score, "
                "snippet(docs, 2, '', '', ' … ', 16) FROM docs WHERE docs MATCH ? ORDER BY score LIMIT ?",
                (match, max(limit * 4, 40)),
            ).fetchall()
        hits: list[Hit] = []
        for rowid, score, snip in rows:
            d = self.docs[int(rowid)]
            if kinds and d.kind not in kinds:
                continue
            value = -float(score) * (CONSTRAINT_BOOST if d.kind == "constraint" else 1.0)
            hits.append(Hit(d.kind, d.id, d.title, d.pointer, round(value, 4), snip or ""))
        hits.sort(key=lambda h: -h.score)
        return hits[:limit]


_builtin_lock = threading.Lock()
_builtin: list[Doc] | None = None
_index_cache: dict[str, tuple[tuple[tuple[str, float, int], ...], Index, ProjectKnowledge]] = {}
_INDEX_CACHE_MAX = 8


def _builtin_docs_cached() -> list[Doc]:
    global _builtin
    with _builtin_lock:
        if _builtin is None:
            _builtin = builtin_docs()
        return _builtin


def _signature(pk: ProjectKnowledge) -> tuple[tuple[str, float, int], ...]:
    sig: list[tuple[str, float, int]] = []
    for f in pk.files:
        try:
            st = f.path.stat()
            sig.append((str(f.path), st.st_mtime, st.st_size))
        except OSError:
            sig.append((str(f.path), 0.0, -1))
    return tuple(sig)


def index_for(workspace: Path, constraints_file: Path | None = None) -> tuple[Index, ProjectKnowledge]:
    """The combined index for a workspace; reparsed only when a knowledge file changed."""
    pk = load_project(workspace, constraints_file)
    key = f"{workspace}|{constraints_file or ''}"
    sig = _signature(pk)
    with _builtin_lock:
        cached = _index_cache.get(key)
    if cached and cached[0] == sig:
        return cached[1], pk
    index = Index(_builtin_docs_cached() + project_docs(pk))
    with _builtin_lock:
        if len(_index_cache) >= _INDEX_CACHE_MAX:
            _index_cache.pop(next(iter(_index_cache)))
        _index_cache[key] = (sig, index, pk)
    return index, pk


_builtin_index: Index | None = None


def builtin_index() -> Index:
    """The index of the built-in knowledge base alone (no project files), built once."""
    global _builtin_index
    docs = _builtin_docs_cached()
    with _builtin_lock:
        if _builtin_index is None:
            _builtin_index = Index(docs)
        return _builtin_index

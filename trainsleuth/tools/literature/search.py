"""Search every requested source in parallel, within one deadline; cache, de-duplicate and rank;
always add knowledge-base matches, and say plainly which sources failed and why."""

from __future__ import annotations

import re
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainsleuth.state.store import Store
from trainsleuth.tools.literature.cache import LiteratureCache
from trainsleuth.tools.literature.config import SOURCES, LiteratureConfig
from trainsleuth.tools.literature.http import SourceError
from trainsleuth.tools.literature.query import build_query
from trainsleuth.tools.literature.sources import FETCHERS, Result

SOURCE_PRIOR = {"github": 1.0, "stackexchange": 1.0, "arxiv": 0.85, "web": 0.7}
MAX_LIMIT = 50


@dataclass
class SourceStatus:
    source: str
    status: str  # ok | cached | failed | rate_limited | disabled | skipped | timeout
    message: str = ""
    count: int = 0
    elapsed_s: float = 0.0


@dataclass
class LiteratureReport:
    query: str
    search_query: str
    results: list[dict[str, Any]] = field(default_factory=list)
    sources: list[SourceStatus] = field(default_factory=list)
    knowledge: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def failed_sources(self) -> list[str]:
        return [
            s.source for s in self.sources if s.status in {"failed", "rate_limited", "timeout", "skipped"}
        ]


def _norm_url(url: str) -> str:
    u = re.sub(r"^https?://(www\.)?", "", url.strip().lower()).rstrip("/")
    u = re.sub(r"(arxiv\.org/)(abs|pdf)/([\d.]+)(v\d+)?(\.pdf)?", r"\1abs/\3", u)
    return u.split("#", 1)[0]


def _norm_title(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", title.lower()).strip()


def rank_results(query: str, results: list[Result]) -> list[dict[str, Any]]:
    """Score by term overlap (title counts double), source prior and position within its source;
    merge duplicates (same URL or same title), keeping the best and noting where else it appeared."""
    from trainsleuth.knowledge.search import query_terms

    terms = set(query_terms(query))
    position: dict[str, int] = {}
    scored: list[tuple[float, Result]] = []
    for r in results:
        pos = position.get(r.source, 0)
        position[r.source] = pos + 1
        title_terms = set(query_terms(r.title))
        snip_terms = set(query_terms(r.snippet))
        overlap = (
            (2 * len(terms & title_terms) + len(terms & snip_terms)) / (3 * len(terms)) if terms else 0.0
        )
        score = SOURCE_PRIOR.get(r.source, 0.5) * (0.6 * overlap + 0.4 / (1 + pos))
        if r.extra.get("answered"):
            score += 0.05
        scored.append((round(score, 4), r))
    scored.sort(key=lambda x: -x[0])
    out: list[dict[str, Any]] = []
    by_key: dict[str, dict[str, Any]] = {}
    for score, r in scored:
        keys = [_norm_url(r.url), "t:" + _norm_title(r.title)]
        existing = next((by_key[k] for k in keys if k in by_key), None)
        if existing is not None:
            if r.source not in existing["also_in"] and r.source != existing["source"]:
                existing["also_in"].append(r.source)
            continue
        item = {**r.as_dict(), "score": score, "also_in": []}
        out.append(item)
        for k in keys:
            by_key[k] = item
    return out


def _knowledge_matches(text: str, workspace: Path | None, limit: int) -> list[dict[str, Any]]:
    from trainsleuth.knowledge.search import builtin_index, index_for

    try:
        index = index_for(workspace)[0] if workspace else builtin_index()
        hits = index.search(text, limit=limit)
    except Exception:  # knowledge matches are a bonus; never fail the search for them
        return []
    return [
        {"kind": h.kind, "id": h.id, "title": h.title, "pointer": h.pointer, "score": h.score} for h in hits
    ]


def search_literature(
    text: str,
    *,
    sources: list[str] | None = None,
    limit: int = 10,
    config: LiteratureConfig | None = None,
    store: Store | None = None,
    workspace: Path | None = None,
    use_cache: bool = True,
) -> LiteratureReport:
    """Search `sources` (default: all configured) for `text` (a question, an error or a traceback)."""
    started = time.monotonic()
    cfg = config or LiteratureConfig.from_env()
    limit = max(1, min(int(limit), MAX_LIMIT))
    wanted = list(dict.fromkeys(sources or list(SOURCES)))
    unknown = [s for s in wanted if s not in SOURCES]
    if unknown:
        raise ValueError(f"unknown source(s) {', '.join(unknown)}; choose from {', '.join(SOURCES)}")
    query = build_query(text)
    report = LiteratureReport(query=text, search_query=query)
    cache = LiteratureCache(store) if store is not None else None

    collected: list[Result] = []
    to_fetch: list[str] = []
    for src in wanted:
        if src not in cfg.sources:
            report.sources.append(SourceStatus(src, "disabled", "not enabled in this configuration"))
            continue
        if src == "web" and cfg.web_search is None:
            report.sources.append(SourceStatus(src, "disabled", cfg.web_disabled_reason))
            continue
        if not query:
            report.sources.append(SourceStatus(src, "skipped", "empty query"))
            continue
        if cache is not None:
            hit = cache.get(src, query, limit, cfg.cache_ttl_s) if use_cache else None
            if hit is not None:
                cached_items, fetched_at = hit
                age = time.time() - fetched_at
                collected += [Result.from_dict(d) for d in cached_items]
                report.sources.append(
                    SourceStatus(src, "cached", f"from cache, fetched {age:.0f}s ago", len(cached_items))
                )
                continue
            back = cache.backoff(src)
            # A rate limit is always respected; an "unreachable" mark is skipped when use_cache=False.
            if back is not None and (back[1] == "rate_limited" or use_cache):
                until, kind, reason = back
                status = "rate_limited" if kind == "rate_limited" else "skipped"
                report.sources.append(
                    SourceStatus(
                        src, status, f"{reason} (not retried for another {until - time.time():.0f}s)"
                    )
                )
                continue
        to_fetch.append(src)

    if to_fetch:
        deadline = time.monotonic() + cfg.deadline_s
        pool = ThreadPoolExecutor(max_workers=len(to_fetch), thread_name_prefix="literature")
        futures: dict[Future[list[Result]], tuple[str, float]] = {
            pool.submit(FETCHERS[src], cfg, query, limit, deadline): (src, time.monotonic())
            for src in to_fetch
        }
        _done, pending = wait(futures, timeout=max(0.0, deadline - time.monotonic()) + 0.5)
        for fut in futures:
            src, t0 = futures[fut]
            elapsed = round(time.monotonic() - t0, 3)
            if fut in pending:
                report.sources.append(
                    SourceStatus(src, "timeout", f"no answer within {cfg.deadline_s:.0f}s", 0, elapsed)
                )
                continue
            try:
                fetched = fut.result()
            except SourceError as exc:
                status = {"rate_limited": "rate_limited", "disabled": "disabled"}.get(exc.kind, "failed")
                report.sources.append(SourceStatus(src, status, exc.message, 0, elapsed))
                if cache is not None and exc.kind == "rate_limited":
                    cache.set_backoff(src, exc.retry_after_s or 60.0, exc.kind, exc.message)
                elif cache is not None and exc.kind == "unreachable":
                    cache.set_backoff(src, cfg.offline_ttl_s, exc.kind, f"unreachable: {exc.message}")
                continue
            except Exception as exc:  # a parser bug must not sink the other sources
                report.sources.append(SourceStatus(src, "failed", f"{type(exc).__name__}: {exc}", 0, elapsed))
                continue
            items = fetched[:limit]
            collected += items
            report.sources.append(SourceStatus(src, "ok", "", len(items), elapsed))
            if cache is not None:
                cache.put(src, query, limit, [r.as_dict() for r in items])
                backoff = max((int(r.extra.get("backoff_s", 0)) for r in items), default=0)
                if backoff:
                    cache.set_backoff(
                        src, backoff, "rate_limited", f"the API asked for a {backoff}s back-off"
                    )
                else:
                    cache.clear_backoff(src)
        pool.shutdown(wait=False, cancel_futures=True)

    order = {s: i for i, s in enumerate(wanted)}
    report.sources.sort(key=lambda s: order.get(s.source, 99))
    report.results = rank_results(query, collected)[:limit]
    report.knowledge = _knowledge_matches(query or text, workspace, min(limit, 8))
    report.elapsed_s = round(time.monotonic() - started, 3)
    return report

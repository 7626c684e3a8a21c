"""The four sources: request shape and response parsing for each real API format."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from trainsleuth.tools.literature.config import LiteratureConfig
from trainsleuth.tools.literature.http import Response, SourceError, get

ATOM = "{http://www.w3.org/2005/Atom}"
_TAGS = re.compile(r"<[^>]+>")


@dataclass
class Result:
    source: str
    title: str
    url: str
    snippet: str = ""
    date: str | None = None
    native_score: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "title": self.title,
            "url": self.url,
            "snippet": self.snippet,
            "date": self.date,
            "native_score": self.native_score,
            "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Result:
        return cls(
            source=str(d["source"]),
            title=str(d["title"]),
            url=str(d["url"]),
            snippet=str(d.get("snippet") or ""),
            date=d.get("date"),
            native_score=d.get("native_score"),
            extra=dict(d.get("extra") or {}),
        )


def _snip(text: str | None, n: int = 300) -> str:
    text = _TAGS.sub(" ", text or "")
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def _http(
    cfg: LiteratureConfig, url: str, params: dict[str, Any], headers: dict[str, str], deadline: float
) -> Response:
    return get(
        url,
        params=params,
        headers={"User-Agent": cfg.user_agent, **headers},
        connect_timeout_s=cfg.connect_timeout_s,
        read_timeout_s=cfg.read_timeout_s,
        retries=cfg.retries,
        backoff_s=cfg.backoff_s,
        max_retry_after_s=cfg.max_retry_after_s,
        deadline=deadline,
    )


def _json(resp: Response, source: str) -> Any:
    try:
        return json.loads(resp.text())
    except ValueError as exc:
        raise SourceError("malformed", f"{source} returned a body that is not JSON ({exc})") from exc


# ---------------------------------------------------------------------------- arXiv (Atom XML)


def parse_arxiv(body: str) -> list[Result]:
    if "<!DOCTYPE" in body[:2000] or "<!ENTITY" in body[:5000]:
        raise SourceError("malformed", "arXiv response declares a DTD; refused")
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise SourceError("malformed", f"arXiv returned XML that does not parse ({exc})") from exc
    if root.tag != f"{ATOM}feed":
        raise SourceError("malformed", f"arXiv returned {root.tag!r}, not an Atom feed")
    out: list[Result] = []
    for entry in root.findall(f"{ATOM}entry"):
        title = _snip(entry.findtext(f"{ATOM}title"), 300)
        url = (entry.findtext(f"{ATOM}id") or "").strip()
        for link in entry.findall(f"{ATOM}link"):
            if link.get("rel") == "alternate" and link.get("href"):
                url = link.get("href", url)
        if not title or not url:
            continue
        if title.lower() == "error":  # arXiv reports bad queries as a single entry titled "Error"
            raise SourceError("http", f"arXiv rejected the query: {_snip(entry.findtext(f'{ATOM}summary'))}")
        authors = [_snip(a.findtext(f"{ATOM}name"), 80) for a in entry.findall(f"{ATOM}author")]
        out.append(
            Result(
                source="arxiv",
                title=title,
                url=url,
                snippet=_snip(entry.findtext(f"{ATOM}summary")),
                date=(entry.findtext(f"{ATOM}published") or "")[:10] or None,
                extra={"authors": authors[:6]},
            )
        )
    return out


def fetch_arxiv(cfg: LiteratureConfig, query: str, limit: int, deadline: float) -> list[Result]:
    from trainsleuth.knowledge.search import query_terms

    # Exception class names never occur in papers; the remaining words are OR-ed and arXiv's relevance
    # sort puts the entries matching most of them first (AND of a whole error message finds nothing).
    words = [w for w in query_terms(query) if not re.search(r"(error|exception|warning)$", w)][:8]
    terms = " OR ".join(f"all:{w}" for w in words) or "all:training"
    resp = _http(
        cfg,
        cfg.arxiv_url,
        {"search_query": terms, "start": 0, "max_results": limit, "sortBy": "relevance"},
        {"Accept": "application/atom+xml"},
        deadline,
    )
    return parse_arxiv(resp.text())


# ---------------------------------------------------------------------------- GitHub issue search


def parse_github(data: Any) -> list[Result]:
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise SourceError("malformed", "GitHub search response has no 'items' list")
    out: list[Result] = []
    for item in data["items"]:
        if not isinstance(item, dict) or not item.get("html_url") or not item.get("title"):
            continue
        repo = str(item.get("repository_url", "")).rsplit("/repos/", 1)[-1]
        out.append(
            Result(
                source="github",
                title=_snip(str(item["title"]), 300),
                url=str(item["html_url"]),
                snippet=_snip(item.get("body")),
                date=str(item.get("created_at") or "")[:10] or None,
                native_score=float(item["score"]) if isinstance(item.get("score"), (int, float)) else None,
                extra={
                    "repository": repo,
                    "state": item.get("state"),
                    "comments": item.get("comments"),
                    "pull_request": "pull_request" in item,
                },
            )
        )
    return out


def fetch_github(cfg: LiteratureConfig, query: str, limit: int, deadline: float) -> list[Result]:
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    if cfg.github_token:
        headers["Authorization"] = f"Bearer {cfg.github_token}"
    resp = _http(
        cfg,
        cfg.github_api_url.rstrip("/") + "/search/issues",
        {"q": f"{query} is:issue", "per_page": limit},
        headers,
        deadline,
    )
    return parse_github(_json(resp, "GitHub"))


# ---------------------------------------------------------------------------- Stack Exchange


def parse_stackexchange(data: Any) -> list[Result]:
    if not isinstance(data, dict):
        raise SourceError("malformed", "Stack Exchange response is not a JSON object")
    if "error_id" in data:
        name = data.get("error_name", "error")
        if name == "throttle_violation":
            raise SourceError(
                "rate_limited", f"Stack Exchange throttled: {data.get('error_message', '')}", 60.0
            )
        raise SourceError("http", f"Stack Exchange error {data.get('error_id')}: {name}")
    if not isinstance(data.get("items"), list):
        raise SourceError("malformed", "Stack Exchange response has no 'items' list")
    out: list[Result] = []
    for item in data["items"]:
        if not isinstance(item, dict) or not item.get("link") or not item.get("title"):
            continue
        import html

        out.append(
            Result(
                source="stackexchange",
                title=html.unescape(_snip(str(item["title"]), 300)),
                url=str(item["link"]),
                snippet=html.unescape(_snip(item.get("body") or item.get("excerpt"))),
                native_score=float(item["score"]) if isinstance(item.get("score"), (int, float)) else None,
                extra={
                    "answered": item.get("is_answered"),
                    "answers": item.get("answer_count"),
                    "tags": list(item.get("tags") or [])[:8],
                },
            )
        )
    return out


def fetch_stackexchange(cfg: LiteratureConfig, query: str, limit: int, deadline: float) -> list[Result]:
    params: dict[str, Any] = {
        "order": "desc",
        "sort": "relevance",
        "q": query,
        "site": cfg.stackexchange_site,
        "pagesize": limit,
        "filter": "withbody",
    }
    if cfg.stackexchange_key:
        params["key"] = cfg.stackexchange_key
    resp = _http(cfg, cfg.stackexchange_url.rstrip("/") + "/search/advanced", params, {}, deadline)
    data = _json(resp, "Stack Exchange")
    results = parse_stackexchange(data)
    if isinstance(data, dict) and isinstance(data.get("backoff"), int) and data["backoff"] > 0:
        # The API asks clients to wait `backoff` seconds before the next call of this method.
        for r in results:
            r.extra["backoff_s"] = data["backoff"]
    return results


# ---------------------------------------------------------------------------- web (ddgs)


def parse_web(items: Any) -> list[Result]:
    if not isinstance(items, list):
        raise SourceError("malformed", "web search backend returned something other than a list")
    out: list[Result] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        url = item.get("href") or item.get("url") or item.get("link")
        title = item.get("title")
        if not url or not title:
            continue
        out.append(
            Result(source="web", title=_snip(str(title), 300), url=str(url), snippet=_snip(item.get("body")))
        )
    return out


def fetch_web(cfg: LiteratureConfig, query: str, limit: int, deadline: float) -> list[Result]:
    import time

    if cfg.web_search is None:
        raise SourceError("disabled", cfg.web_disabled_reason)
    remaining = max(0.5, deadline - time.monotonic())
    try:
        items = cfg.web_search(query, limit, min(cfg.read_timeout_s, remaining))
    except SourceError:
        raise
    except Exception as exc:  # the backend's own errors (ddgs raises DDGSException, timeouts, ...)
        text = f"{type(exc).__name__}: {exc}"
        kind = "rate_limited" if "ratelimit" in text.lower().replace(" ", "") else "unreachable"
        raise SourceError(kind, f"web search failed: {text[:200]}") from exc
    return parse_web(items)


FETCHERS = {
    "arxiv": fetch_arxiv,
    "github": fetch_github,
    "stackexchange": fetch_stackexchange,
    "web": fetch_web,
}

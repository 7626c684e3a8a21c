"""Literature-search settings: base URLs, timeouts, retries, cache TTL, the web backend.

Everything can be set from the environment (so a deployment can point the sources at a mirror or
a proxy) and overridden in code (tests point the base URLs at a local HTTP server).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SOURCES = ("arxiv", "github", "stackexchange", "web")

# A web search backend: (query, max_results, timeout_s) -> list of {"title", "href", "body"} dicts.
WebSearch = Callable[[str, int, float], list[dict[str, Any]]]


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def ddgs_web_search(query: str, max_results: int, timeout_s: float) -> list[dict[str, Any]]:
    """The default web backend: the `ddgs` metasearch package (imported only when used)."""
    from ddgs import DDGS

    return list(DDGS(timeout=max(1, round(timeout_s))).text(query, max_results=max_results) or [])


@dataclass
class LiteratureConfig:
    arxiv_url: str = "https://export.arxiv.org/api/query"
    github_api_url: str = "https://api.github.com"
    stackexchange_url: str = "https://api.stackexchange.com/2.3"
    stackexchange_site: str = "stackoverflow"
    stackexchange_key: str | None = None
    github_token: str | None = None
    # Web search backend; None disables the source, with `web_disabled_reason` as the explanation.
    web_search: WebSearch | None = ddgs_web_search
    web_disabled_reason: str = "web search is disabled (TRAINSLEUTH_WEB_SEARCH=off)"
    connect_timeout_s: float = 2.0
    read_timeout_s: float = 6.0
    retries: int = 2
    backoff_s: float = 0.5
    max_retry_after_s: float = 5.0
    deadline_s: float = 12.0
    cache_ttl_s: float = 24 * 3600.0
    offline_ttl_s: float = 60.0
    sources: tuple[str, ...] = SOURCES
    user_agent: str = "trainsleuth-literature/0.1 (+https://github.com/trainsleuth/trainsleuth)"
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> LiteratureConfig:
        env = os.environ
        web_mode = env.get("TRAINSLEUTH_WEB_SEARCH", "ddgs").strip().lower()
        offline = env.get("TRAINSLEUTH_OFFLINE", "").strip().lower() in {"1", "true", "yes"}
        sources = tuple(
            s.strip()
            for s in env.get("TRAINSLEUTH_LITERATURE_SOURCES", ",".join(SOURCES)).split(",")
            if s.strip() in SOURCES
        )
        cfg = cls(
            arxiv_url=env.get("TRAINSLEUTH_ARXIV_URL", cls.arxiv_url),
            github_api_url=env.get("TRAINSLEUTH_GITHUB_API_URL", cls.github_api_url),
            stackexchange_url=env.get("TRAINSLEUTH_STACKEXCHANGE_URL", cls.stackexchange_url),
            stackexchange_site=env.get("TRAINSLEUTH_STACKEXCHANGE_SITE", cls.stackexchange_site),
            stackexchange_key=env.get("TRAINSLEUTH_STACKEXCHANGE_KEY") or None,
            github_token=env.get("TRAINSLEUTH_GITHUB_TOKEN") or env.get("GITHUB_TOKEN") or None,
            web_search=None if web_mode in {"off", "0", "false", "none"} else ddgs_web_search,
            connect_timeout_s=_env_float("TRAINSLEUTH_LITERATURE_CONNECT_TIMEOUT", cls.connect_timeout_s),
            read_timeout_s=_env_float("TRAINSLEUTH_LITERATURE_TIMEOUT", cls.read_timeout_s),
            retries=_env_int("TRAINSLEUTH_LITERATURE_RETRIES", cls.retries),
            deadline_s=_env_float("TRAINSLEUTH_LITERATURE_DEADLINE", cls.deadline_s),
            cache_ttl_s=_env_float("TRAINSLEUTH_LITERATURE_TTL", cls.cache_ttl_s),
            sources=sources or SOURCES,
        )
        if offline:
            cfg.sources = ()
        return cfg

"""Literature search against a real HTTP server on 127.0.0.1 that speaks each source's real format
(arXiv Atom XML, GitHub search JSON, gzip-compressed Stack Exchange JSON), including 429, 500,
timeouts and malformed bodies. The public internet is never touched: base URLs point at the local
server and the web source is either disabled explicitly or backed by the same local server."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.state.store import Store
from trainsleuth.tools.literature import LiteratureConfig, search_literature
from trainsleuth.tools.literature.sources import parse_arxiv

ARXIV_FEED = """<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/"
      xmlns:arxiv="http://arxiv.org/schemas/atom">
  <link href="http://arxiv.org/api/query?search_query=all:fp16" rel="self" type="application/atom+xml"/>
  <title type="html">ArXiv Query: search_query=all:fp16&amp;start=0&amp;max_results=10</title>
  <id>http://arxiv.org/api/abc</id>
  <updated>2026-01-01T00:00:00-05:00</updated>
  <opensearch:totalResults>2</opensearch:totalResults>
  <opensearch:startIndex>0</opensearch:startIndex>
  <opensearch:itemsPerPage>10</opensearch:itemsPerPage>
  <entry>
    <id>http://arxiv.org/abs/1710.03740v3</id>
    <updated>2018-02-15T00:00:00Z</updated>
    <published>2017-10-10T17:42:04Z</published>
    <title>Mixed Precision
      Training</title>
    <summary>  We train networks with half-precision floating point numbers and keep a
      single-precision master copy of the weights, with loss scaling to preserve small gradients.</summary>
    <author><name>Ada Example</name></author>
    <author><name>Bo Sample</name></author>
    <arxiv:primary_category term="cs.AI" scheme="http://arxiv.org/schemas/atom"/>
    <link href="http://arxiv.org/abs/1710.03740v3" rel="alternate" type="text/html"/>
    <link title="pdf" href="http://arxiv.org/pdf/1710.03740v3" rel="related" type="application/pdf"/>
    <category term="cs.AI" scheme="http://arxiv.org/schemas/atom"/>
  </entry>
  <entry>
    <id>http://arxiv.org/abs/1905.12322v3</id>
    <updated>2019-06-13T00:00:00Z</updated>
    <published>2019-05-29T00:00:00Z</published>
    <title>A Study of BFLOAT16 for Deep Learning Training</title>
    <summary>bfloat16 keeps the fp32 exponent range, so fp16 overflow and loss scaling go away.</summary>
    <author><name>Cy Person</name></author>
    <link href="http://arxiv.org/abs/1905.12322v3" rel="alternate" type="text/html"/>
  </entry>
</feed>
"""

GITHUB_JSON = {
    "total_count": 2,
    "incomplete_results": False,
    "items": [
        {
            "url": "https://api.github.com/repos/example/trainer/issues/101",
            "repository_url": "https://api.github.com/repos/example/trainer",
            "html_url": "https://github.com/example/trainer/issues/101",
            "number": 101,
            "title": "fp16 overflow gives NaN loss after a few hundred steps",
            "user": {"login": "someone"},
            "state": "closed",
            "comments": 7,
            "created_at": "2024-03-02T10:00:00Z",
            "body": "With AMP the loss becomes NaN; the GradScaler scale keeps dropping.",
            "score": 1.0,
        },
        {
            "url": "https://api.github.com/repos/example/trainer/issues/202",
            "repository_url": "https://api.github.com/repos/example/trainer",
            "html_url": "https://github.com/example/trainer/issues/202",
            "number": 202,
            "title": "Docs: mixed precision example",
            "state": "open",
            "comments": 0,
            "created_at": "2024-05-01T10:00:00Z",
            "body": None,
            "score": 1.0,
            "pull_request": {"url": "https://api.github.com/repos/example/trainer/pulls/202"},
        },
    ],
}

SE_JSON = {
    "items": [
        {
            "tags": ["pytorch", "mixed-precision"],
            "owner": {"display_name": "q"},
            "is_answered": True,
            "view_count": 1234,
            "answer_count": 2,
            "score": 15,
            "question_id": 555,
            "link": "https://stackoverflow.com/questions/555/nan-loss-with-fp16",
            "title": "NaN loss with fp16 &quot;autocast&quot; in PyTorch",
            "body": "<p>My loss becomes <code>nan</code> when I enable fp16 overflow?</p>",
        }
    ],
    "has_more": False,
    "quota_max": 300,
    "quota_remaining": 299,
}


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


def json_reply(data: Any, *, gzip_body: bool = False, header: bool = True, status: int = 200) -> Reply:
    raw = json.dumps(data).encode()
    headers = {"Content-Type": "application/json; charset=utf-8"}
    if gzip_body:
        raw = gzip.compress(raw)
        if header:
            headers["Content-Encoding"] = "gzip"
    return Reply(status, raw, headers)


class FakeSources:
    """Routes: /arxiv/api/query, /github/search/issues, /se/2.3/search/advanced, /web/search."""

    def __init__(self) -> None:
        self.plans: dict[str, list[Reply]] = {}
        self.requests: list[tuple[str, dict[str, list[str]], dict[str, str]]] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parsed = urlparse(self.path)
                with fake.lock:
                    fake.requests.append((parsed.path, parse_qs(parsed.query), dict(self.headers)))
                    plan = fake.plans.get(parsed.path)
                    if not plan:
                        reply = Reply(404, b'{"message": "Not Found"}')
                    elif len(plan) > 1:
                        reply = plan.pop(0)
                    else:
                        reply = plan[0]
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                try:
                    self.send_response(reply.status)
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def count(self, path: str) -> int:
        with self.lock:
            return sum(1 for p, _, _ in self.requests if p == path)

    def config(self, **overrides: Any) -> LiteratureConfig:
        values: dict[str, Any] = dict(
            arxiv_url=f"{self.base}/arxiv/api/query",
            github_api_url=f"{self.base}/github",
            stackexchange_url=f"{self.base}/se/2.3",
            web_search=None,
            web_disabled_reason="source disabled in tests",
            connect_timeout_s=1.0,
            read_timeout_s=2.0,
            retries=2,
            backoff_s=0.05,
            max_retry_after_s=1.0,
            deadline_s=6.0,
        )
        values.update(overrides)
        return LiteratureConfig(**values)

    def serve_all_ok(self) -> None:
        self.plans["/arxiv/api/query"] = [
            Reply(200, ARXIV_FEED.encode(), {"Content-Type": "application/atom+xml; charset=utf-8"})
        ]
        self.plans["/github/search/issues"] = [json_reply(GITHUB_JSON)]
        self.plans["/se/2.3/search/advanced"] = [json_reply(SE_JSON, gzip_body=True)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


A = "/arxiv/api/query"
G = "/github/search/issues"
S = "/se/2.3/search/advanced"


@pytest.fixture
def fake() -> Iterator[FakeSources]:
    f = FakeSources()
    try:
        yield f
    finally:
        f.close()


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / ".trainsleuth" / "state.db")


def _status(report: Any) -> dict[str, Any]:
    return {s.source: s for s in report.sources}


def test_all_sources_parse_their_real_formats(fake: FakeSources, store: Store) -> None:
    fake.serve_all_ok()
    report = search_literature("fp16 overflow NaN loss", config=fake.config(), store=store, limit=10)
    st = _status(report)
    assert st["arxiv"].status == "ok" and st["arxiv"].count == 2
    assert st["github"].status == "ok" and st["github"].count == 2
    assert st["stackexchange"].status == "ok" and st["stackexchange"].count == 1
    assert st["web"].status == "disabled" and st["web"].message == "source disabled in tests"
    by_url = {r["url"]: r for r in report.results}
    arx = by_url["http://arxiv.org/abs/1710.03740v3"]
    assert arx["title"] == "Mixed Precision Training"  # whitespace in the Atom title folded
    assert arx["extra"]["authors"] == ["Ada Example", "Bo Sample"] and arx["date"] == "2017-10-10"
    gh = by_url["https://github.com/example/trainer/issues/101"]
    assert gh["extra"]["repository"] == "example/trainer" and gh["extra"]["state"] == "closed"
    assert by_url["https://github.com/example/trainer/issues/202"]["extra"]["pull_request"] is True
    se = by_url["https://stackoverflow.com/questions/555/nan-loss-with-fp16"]
    assert se["title"] == 'NaN loss with fp16 "autocast" in PyTorch'  # HTML entities decoded
    assert "<p>" not in se["snippet"] and se["extra"]["answered"] is True
    # Ranked: scores are non-increasing, and the most on-topic issue outranks the docs PR.
    scores = [r["score"] for r in report.results]
    assert scores == sorted(scores, reverse=True)
    urls = [r["url"] for r in report.results]
    assert urls.index("https://github.com/example/trainer/issues/101") < urls.index(
        "https://github.com/example/trainer/issues/202"
    )
    # The requests carry each API's parameters.
    _, aq, _ = next(r for r in fake.requests if r[0] == A)
    assert aq["search_query"] == ["all:fp16 OR all:overflow OR all:nan OR all:loss"]
    assert aq["max_results"] == ["10"] and aq["sortBy"] == ["relevance"]
    _, gq, gh_headers = next(r for r in fake.requests if r[0] == G)
    assert "is:issue" in gq["q"][0] and "Authorization" not in gh_headers
    _, sq, _ = next(r for r in fake.requests if r[0] == S)
    assert sq["site"] == ["stackoverflow"] and sq["sort"] == ["relevance"]
    assert report.knowledge and report.knowledge[0]["pointer"].startswith(("failure-mode://", "checklist://"))


def test_github_token_is_sent_when_configured(fake: FakeSources) -> None:
    fake.serve_all_ok()
    search_literature("loss NaN", sources=["github"], config=fake.config(github_token="tok123"))
    _, _, headers = next(r for r in fake.requests if r[0] == G)
    assert headers.get("Authorization") == "Bearer tok123"


def test_gzip_body_without_content_encoding_header(fake: FakeSources) -> None:
    fake.plans[S] = [json_reply(SE_JSON, gzip_body=True, header=False)]
    report = search_literature("nan loss", sources=["stackexchange"], config=fake.config())
    assert _status(report)["stackexchange"].status == "ok"
    assert report.results[0]["url"].endswith("/555/nan-loss-with-fp16")


def test_429_with_retry_after_is_waited_out_then_succeeds(fake: FakeSources, store: Store) -> None:
    fake.plans[G] = [Reply(429, b'{"message": "slow down"}', {"Retry-After": "0.2"}), json_reply(GITHUB_JSON)]
    report = search_literature("fp16 nan", sources=["github"], config=fake.config(), store=store)
    assert _status(report)["github"].status == "ok"
    assert fake.count(G) == 2


def test_429_with_long_retry_after_reports_rate_limit_and_is_respected(
    fake: FakeSources, store: Store
) -> None:
    fake.plans[S] = [Reply(429, b"{}", {"Retry-After": "120"})]
    cfg = fake.config()
    first = search_literature("fp16 nan", sources=["stackexchange"], config=cfg, store=store)
    st = _status(first)["stackexchange"]
    assert st.status == "rate_limited" and "retry after 120s" in st.message
    assert fake.count(S) == 1  # not retried: the wait exceeds what this call may spend
    second = search_literature("another query", sources=["stackexchange"], config=cfg, store=store)
    st2 = _status(second)["stackexchange"]
    assert st2.status == "rate_limited" and "not retried for another" in st2.message
    assert fake.count(S) == 1  # the back-off window kept us away from the server
    assert second.failed_sources == ["stackexchange"]


def test_429_with_http_date_retry_after(fake: FakeSources) -> None:
    from email.utils import formatdate

    fake.plans[A] = [Reply(429, b"", {"Retry-After": formatdate(time.time() + 3600, usegmt=True)})]
    report = search_literature("fp16", sources=["arxiv"], config=fake.config())
    st = _status(report)["arxiv"]
    assert st.status == "rate_limited" and "retry after" in st.message and fake.count(A) == 1


def test_github_403_rate_limit_headers(fake: FakeSources) -> None:
    reset = int(time.time()) + 600
    fake.plans[G] = [
        Reply(
            403,
            b'{"message": "API rate limit exceeded"}',
            {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)},
        )
    ]
    report = search_literature("nan", sources=["github"], config=fake.config())
    assert _status(report)["github"].status == "rate_limited"


def test_500_is_retried_with_backoff(fake: FakeSources) -> None:
    fake.plans[A] = [Reply(500, b"oops"), Reply(502, b"bad gateway"), Reply(200, ARXIV_FEED.encode())]
    report = search_literature("mixed precision", sources=["arxiv"], config=fake.config(retries=2))
    assert _status(report)["arxiv"].status == "ok"
    assert fake.count(A) == 3


def test_persistent_500_fails_after_the_retries(fake: FakeSources) -> None:
    fake.plans[A] = [Reply(500, b"oops")]
    report = search_literature("mixed precision", sources=["arxiv"], config=fake.config(retries=2))
    st = _status(report)["arxiv"]
    assert st.status == "failed" and "HTTP 500" in st.message
    assert fake.count(A) == 3 and report.results == []


def test_client_error_is_not_retried(fake: FakeSources) -> None:
    fake.plans[G] = [Reply(422, b'{"message": "Validation Failed"}')]
    report = search_literature("x y", sources=["github"], config=fake.config())
    st = _status(report)["github"]
    assert st.status == "failed" and "HTTP 422" in st.message and fake.count(G) == 1


def test_timeout_is_reported_per_source(fake: FakeSources) -> None:
    fake.serve_all_ok()
    fake.plans[G] = [Reply(200, json.dumps(GITHUB_JSON).encode(), delay_s=1.5)]
    report = search_literature(
        "fp16 nan", sources=["github", "arxiv"], config=fake.config(read_timeout_s=0.3, retries=1)
    )
    st = _status(report)
    assert st["github"].status == "failed" and "no response within" in st["github"].message
    assert st["arxiv"].status == "ok"  # one slow source does not sink the others
    assert fake.count(G) == 2  # one retry


@pytest.mark.parametrize(
    ("path", "reply", "expect"),
    [
        (A, Reply(200, b"<feed><entry>unclosed"), "does not parse"),
        (A, Reply(200, b"<html><body>maintenance</body></html>"), "not an Atom feed"),
        (G, Reply(200, b"<!doctype html><p>rate limit page"), "not JSON"),
        (G, json_reply({"message": "ok but no items"}), "no 'items' list"),
        (S, Reply(200, b"\x1f\x8b\x08\x00garbage", {"Content-Type": "application/json"}), "corrupt gzip"),
    ],
)
def test_malformed_bodies_fail_that_source_clearly(
    fake: FakeSources, path: str, reply: Reply, expect: str
) -> None:
    fake.plans[path] = [reply]
    source = {A: "arxiv", G: "github", S: "stackexchange"}[path]
    report = search_literature("fp16 overflow", sources=[source], config=fake.config())
    st = _status(report)[source]
    assert st.status == "failed" and expect in st.message
    assert report.knowledge  # the knowledge base still answers


def test_arxiv_error_entry_and_dtd_are_refused() -> None:
    from trainsleuth.tools.literature.http import SourceError

    error_feed = ARXIV_FEED.split("<entry>")[0] + (
        "<entry><id>http://arxiv.org/api/errors#incorrect_id_format</id><title>Error</title>"
        "<summary>incorrect id format</summary></entry></feed>"
    )
    with pytest.raises(SourceError, match="rejected the query"):
        parse_arxiv(error_feed)
    with pytest.raises(SourceError, match="DTD"):
        parse_arxiv('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><feed/>')


def test_stackexchange_throttle_and_backoff_field(fake: FakeSources, store: Store) -> None:
    fake.plans[S] = [
        json_reply({**SE_JSON, "backoff": 30}, gzip_body=True),
    ]
    cfg = fake.config()
    first = search_literature("fp16 nan", sources=["stackexchange"], config=cfg, store=store)
    assert _status(first)["stackexchange"].status == "ok"
    second = search_literature("different question", sources=["stackexchange"], config=cfg, store=store)
    st = _status(second)["stackexchange"]
    assert st.status == "rate_limited" and "30s back-off" in st.message
    assert fake.count(S) == 1
    fake.plans[S] = [
        json_reply({"error_id": 502, "error_name": "throttle_violation", "error_message": "too many"})
    ]
    third = search_literature("x", sources=["stackexchange"], config=cfg)
    assert _status(third)["stackexchange"].status == "rate_limited"


def test_results_are_cached_with_ttl(fake: FakeSources, store: Store) -> None:
    fake.serve_all_ok()
    cfg = fake.config()
    first = search_literature("fp16 overflow", sources=["arxiv", "github"], config=cfg, store=store)
    second = search_literature("fp16 overflow", sources=["arxiv", "github"], config=cfg, store=store)
    assert fake.count(A) == 1 and fake.count(G) == 1
    assert {s.status for s in second.sources} == {"cached"}
    assert [r["url"] for r in second.results] == [r["url"] for r in first.results]
    # use_cache=False refetches; an expired TTL refetches too.
    search_literature("fp16 overflow", sources=["arxiv"], config=cfg, store=store, use_cache=False)
    assert fake.count(A) == 2
    search_literature("fp16 overflow", sources=["arxiv"], config=fake.config(cache_ttl_s=0.0), store=store)
    assert fake.count(A) == 3
    # A larger limit than the cached one is not answered from the cache when more may exist.
    fake.plans[G] = [json_reply({**GITHUB_JSON, "items": GITHUB_JSON["items"][:1]})]
    search_literature("other query", sources=["github"], config=cfg, store=store, limit=1)
    search_literature("other query", sources=["github"], config=cfg, store=store, limit=5)
    assert fake.count(G) == 3


def test_duplicates_across_sources_are_merged(fake: FakeSources) -> None:
    fake.serve_all_ok()
    seen_queries: list[str] = []

    def local_web(query: str, max_results: int, timeout_s: float) -> list[dict[str, Any]]:
        # A web backend served by the local HTTP server (same dict shape as ddgs).
        seen_queries.append(query)
        resp = httpx.get(f"{fake.base}/web/search", params={"q": query}, timeout=timeout_s)
        resp.raise_for_status()
        return list(resp.json())

    fake.plans["/web/search"] = [
        json_reply(
            [
                {
                    "title": "fp16 overflow gives NaN loss",
                    "href": "https://github.com/example/trainer/issues/101/",
                    "body": "x",
                },
                {
                    "title": "Mixed Precision Training",
                    "href": "https://arxiv.org/pdf/1710.03740v1.pdf",
                    "body": "y",
                },
                {
                    "title": "A blog post about NaN losses in fp16",
                    "href": "https://blog.example.org/nan",
                    "body": "fp16",
                },
                {"no_title": True},
            ]
        )
    ]
    report = search_literature("fp16 NaN loss", config=fake.config(web_search=local_web), limit=20)
    assert _status(report)["web"].status == "ok" and seen_queries == ["fp16 NaN loss"]
    urls = [r["url"] for r in report.results]
    assert len(urls) == len({u.rstrip("/") for u in urls})
    gh = next(r for r in report.results if r["url"] == "https://github.com/example/trainer/issues/101")
    assert "web" in gh["also_in"]
    arx = next(r for r in report.results if "1710.03740" in r["url"])
    assert "web" in arx["also_in"] and sum("1710.03740" in u for u in urls) == 1
    assert "https://blog.example.org/nan" in urls


def test_web_backend_errors_are_reported(fake: FakeSources) -> None:
    def broken(query: str, max_results: int, timeout_s: float) -> list[dict[str, Any]]:
        raise RuntimeError("Ratelimit: 202 from upstream")

    report = search_literature("nan", sources=["web"], config=fake.config(web_search=broken))
    assert _status(report)["web"].status == "rate_limited"


def test_offline_answers_fast_with_knowledge(tmp_path: Path, store: Store) -> None:
    # A port with nothing listening: every source fails at once.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    cfg = LiteratureConfig(
        arxiv_url=f"http://127.0.0.1:{closed}/api/query",
        github_api_url=f"http://127.0.0.1:{closed}",
        stackexchange_url=f"http://127.0.0.1:{closed}/2.3",
        web_search=None,
        web_disabled_reason="source disabled in tests",
    )
    search_literature("warm up imports", sources=[], config=cfg)  # load the knowledge base once
    t0 = time.monotonic()
    report = search_literature(
        "RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output.",
        config=cfg,
        store=store,
        workspace=tmp_path,
    )
    elapsed = time.monotonic() - t0
    print(f"offline answer in {elapsed:.3f}s")
    assert elapsed < 1.0, elapsed
    st = _status(report)
    assert {st[s].status for s in ("arxiv", "github", "stackexchange")} == {"failed"}
    assert all("cannot connect" in st[s].message for s in ("arxiv", "github", "stackexchange"))
    assert report.failed_sources == ["arxiv", "github", "stackexchange"]
    assert report.results == []
    assert any(k["id"] in {"log-of-zero", "unstable-softmax"} for k in report.knowledge)
    # Within the offline window the next call does not even try, and says so.
    again = search_literature("NaN loss", config=cfg, store=store)
    assert all("unreachable" in s.message for s in again.sources if s.source != "web")


def test_unknown_source_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown source"):
        search_literature("x", sources=["scholar"], config=LiteratureConfig(web_search=None))


@pytest.mark.anyio
async def test_search_literature_tool_over_mcp(
    fake: FakeSources, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.serve_all_ok()
    monkeypatch.setenv("TRAINSLEUTH_ARXIV_URL", f"{fake.base}/arxiv/api/query")
    monkeypatch.setenv("TRAINSLEUTH_GITHUB_API_URL", f"{fake.base}/github")
    monkeypatch.setenv("TRAINSLEUTH_STACKEXCHANGE_URL", f"{fake.base}/se/2.3")
    monkeypatch.setenv("TRAINSLEUTH_WEB_SEARCH", "off")
    monkeypatch.setenv("TRAINSLEUTH_LITERATURE_RETRIES", "0")
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    tb = (
        "Traceback (most recent call last):\n"
        '  File "/home/u/proj/train.py", line 12, in <module>\n'
        "    scaler.step(opt)\n"
        "RuntimeError: fp16 overflow produced NaN at 0x7f00deadbeef in /home/u/proj/model.py step 4123\n"
    )
    async with Client(server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        # Left out of tools/list because it equals the MCP default (true).
        assert listed["search_literature"].annotations.open_world_hint in (True, None)
        result = await client.call_tool("search_literature", {"query": tb, "limit": 5})
        assert not result.is_error, result.content[0].text
        data = result.structured_content
        assert data["search_query"].startswith("RuntimeError fp16 overflow produced NaN")
        for dropped in ("/home/u", "0x7f00", "4123"):
            assert dropped not in data["search_query"]
        assert len(data["results"]) == 5
        assert {s["source"]: s["status"] for s in data["sources"]}["web"] == "disabled"
        assert "Literature for" in result.content[0].text
        bad = await client.call_tool("search_literature", {"query": "x", "limit": 500})
        assert bad.is_error
    from trainsleuth.state.store import default_state_path

    assert default_state_path(workspace).exists()  # cached in the workspace's store

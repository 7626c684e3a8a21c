"""One HTTP GET with a timeout, retries with exponential backoff, and rate-limit handling.

* 429 and 503 honour `Retry-After` (seconds or an HTTP date) when it fits the remaining budget;
  otherwise the source is reported as rate-limited with the time to wait.
* GitHub's 403 with `X-RateLimit-Remaining: 0` is a rate limit too (reset time from `X-RateLimit-Reset`).
* 5xx and read timeouts are retried; other 4xx are not. A refused or unroutable connection fails at
  once (it will not get better within the request's budget), so an offline machine answers fast.
* Bodies are decompressed when gzip-encoded, with or without a `Content-Encoding` header.
"""

from __future__ import annotations

import email.utils
import gzip
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

MAX_BODY_BYTES = 5_000_000

_client_lock = threading.Lock()
_client: httpx.Client | None = None


def shared_client() -> httpx.Client:
    """One client per process (thread-safe, connection pooling; its TLS set-up costs ~0.1 s once)."""
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client(follow_redirects=True, limits=httpx.Limits(max_connections=16))
        return _client


class SourceError(Exception):
    def __init__(self, kind: str, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind  # "unreachable" | "timeout" | "rate_limited" | "http" | "malformed" | "deadline"
        self.message = message
        self.retry_after_s = retry_after_s


@dataclass
class Response:
    status: int
    body: bytes
    headers: dict[str, str]
    attempts: int

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def _retry_after(headers: httpx.Headers) -> float | None:
    value = headers.get("retry-after")
    if value:
        value = value.strip()
        try:
            return max(0.0, float(value))
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(value) if value else None
            if parsed is not None:
                return max(0.0, parsed.timestamp() - time.time())
    if headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset"):
        try:
            return max(0.0, float(headers["x-ratelimit-reset"]) - time.time())
        except ValueError:
            return None
    return None


def _body(resp: httpx.Response) -> bytes:
    data = resp.content[: MAX_BODY_BYTES + 1]
    if len(data) > MAX_BODY_BYTES:
        raise SourceError("malformed", f"response larger than {MAX_BODY_BYTES} bytes")
    if data[:2] == b"\x1f\x8b":  # gzip without a Content-Encoding header (Stack Exchange style)
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise SourceError("malformed", f"corrupt gzip body: {exc}") from exc
    return data


def get(
    url: str,
    *,
    params: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    connect_timeout_s: float,
    read_timeout_s: float,
    retries: int,
    backoff_s: float,
    max_retry_after_s: float,
    deadline: float,
    client: httpx.Client | None = None,
) -> Response:
    """GET `url` and return a 2xx response, or raise SourceError saying what went wrong."""
    attempts = 0
    last: SourceError | None = None
    cl = client or shared_client()
    while attempts <= retries:
        remaining = deadline - time.monotonic()
        if remaining <= 0.05:
            raise last or SourceError("deadline", "no time left for this source")
        attempts += 1
        timeout = httpx.Timeout(
            min(read_timeout_s, remaining), connect=min(connect_timeout_s, remaining), pool=1.0
        )
        wait: float | None = None
        try:
            resp = cl.get(url, params=params, headers=headers, timeout=timeout)
        except (httpx.ConnectError, httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise SourceError("unreachable", f"cannot connect: {exc}") from exc
        except httpx.ConnectTimeout as exc:
            raise SourceError("unreachable", f"connection timed out: {exc}") from exc
        except (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout):
            last = SourceError("timeout", f"no response within {timeout.read:.1f}s")
            wait = backoff_s * (2 ** (attempts - 1))
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            last = SourceError("http", f"connection dropped: {exc}")
            wait = backoff_s * (2 ** (attempts - 1))
        else:
            status = resp.status_code
            if 200 <= status < 300:
                return Response(status, _body(resp), dict(resp.headers), attempts)
            rate_limited = status == 429 or (
                status == 403 and resp.headers.get("x-ratelimit-remaining") == "0"
            )
            if rate_limited or status == 503:
                after = _retry_after(resp.headers)
                if rate_limited:
                    last = SourceError(
                        "rate_limited",
                        f"rate limited (HTTP {status})"
                        + (f"; retry after {after:.0f}s" if after is not None else ""),
                        retry_after_s=after if after is not None else 60.0,
                    )
                else:
                    last = SourceError("http", f"HTTP {status} (service unavailable)", retry_after_s=after)
                if after is not None and after > max_retry_after_s:
                    raise last
                wait = after if after is not None else backoff_s * (2 ** (attempts - 1))
            elif status >= 500:
                last = SourceError("http", f"HTTP {status} from the server")
                wait = backoff_s * (2 ** (attempts - 1))
            else:
                detail = resp.text[:200].strip().replace("\n", " ")
                raise SourceError("http", f"HTTP {status}: {detail}")
        if attempts > retries:
            break
        if wait is not None:
            if time.monotonic() + wait >= deadline:
                break
            time.sleep(wait)
    raise last or SourceError("http", "request failed")

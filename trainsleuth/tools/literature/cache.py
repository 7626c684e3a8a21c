"""SQLite cache of literature results (with a TTL) and of per-source back-off windows
(rate limits, unreachable network), in the workspace store under the component "literature"."""

from __future__ import annotations

import json
import time
from typing import Any

from trainsleuth.state.store import Store

MIGRATIONS = [
    """
    CREATE TABLE literature_cache (
        source TEXT NOT NULL,
        query TEXT NOT NULL,
        fetched_limit INTEGER NOT NULL,
        fetched_at REAL NOT NULL,
        results TEXT NOT NULL,
        PRIMARY KEY (source, query)
    );
    CREATE TABLE literature_backoff (
        source TEXT PRIMARY KEY,
        until REAL NOT NULL,
        kind TEXT NOT NULL,
        reason TEXT NOT NULL
    );
    """
]


class LiteratureCache:
    def __init__(self, store: Store) -> None:
        self.store = store
        store.migrate("literature", MIGRATIONS)

    def get(
        self, source: str, query: str, limit: int, ttl_s: float
    ) -> tuple[list[dict[str, Any]], float] | None:
        with self.store.connect() as conn:
            row = conn.execute(
                "SELECT fetched_limit, fetched_at, results FROM literature_cache WHERE source = ? AND query = ?",
                (source, query.lower()),
            ).fetchone()
        if row is None or time.time() - float(row["fetched_at"]) > ttl_s:
            return None
        results = json.loads(row["results"])
        if int(row["fetched_limit"]) < limit and len(results) >= int(row["fetched_limit"]):
            return None  # the cached answer was cut at a smaller limit; fetch more
        return results[:limit], float(row["fetched_at"])

    def put(self, source: str, query: str, limit: int, results: list[dict[str, Any]]) -> None:
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO literature_cache(source, query, fetched_limit, fetched_at, results) "
                "VALUES(?, ?, ?, ?, ?) ON CONFLICT(source, query) DO UPDATE SET "
                "fetched_limit = excluded.fetched_limit, fetched_at = excluded.fetched_at, "
                "results = excluded.results",
                (source, query.lower(), limit, time.time(), json.dumps(results)),
            )

    def backoff(self, source: str) -> tuple[float, str, str] | None:
        """(until, kind, reason) while a back-off window is open for `source`."""
        with self.store.connect() as conn:
            row = conn.execute(
                "SELECT until, kind, reason FROM literature_backoff WHERE source = ?", (source,)
            ).fetchone()
        if row is None or float(row["until"]) <= time.time():
            return None
        return float(row["until"]), str(row["kind"]), str(row["reason"])

    def set_backoff(self, source: str, seconds: float, kind: str, reason: str) -> None:
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO literature_backoff(source, until, kind, reason) VALUES(?, ?, ?, ?) "
                "ON CONFLICT(source) DO UPDATE SET until = excluded.until, kind = excluded.kind, "
                "reason = excluded.reason",
                (source, time.time() + seconds, kind, reason),
            )

    def clear_backoff(self, source: str) -> None:
        with self.store.transaction() as conn:
            conn.execute("DELETE FROM literature_backoff WHERE source = ?", (source,))

"""Working time: what counts toward the quick pathway's limit.

The quick pathway is for an obvious cause found fast. What it limits is the assistant's own work, so
the time it spends waiting is not counted: tool calls the server runs for it (a probe, a bisect, the
reproducer of submit_diagnosis or verify_fix, an approval that waits for the person), jobs running in
the background, and the person's pending decisions. Calls of at least `MIN_SPAN_S` are recorded as
spans on every open quick-pathway investigation (in its sealed record); jobs and the person's requests
are read where they are kept. Working time = elapsed time minus the union of those spans.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from trainsleuth.protocol.gate import DONE_PHASES
from trainsleuth.protocol.ledger import dumps, sealed_tx
from trainsleuth.state.store import Store

Span = tuple[float, float]

MIN_SPAN_S = 1.0
# Spans kept per investigation; older ones are folded into one number (they are disjoint once merged).
MAX_SPANS = 200


def merge(spans: Iterable[Span]) -> list[Span]:
    """Sorted, disjoint spans covering the same time."""
    out: list[list[float]] = []
    for start, end in sorted((float(a), float(b)) for a, b in spans if b > a):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


def covered(spans: Iterable[Span], start: float, end: float) -> float:
    """Seconds of [start, end] that the spans cover."""
    total = 0.0
    for a, b in merge(spans):
        lo, hi = max(a, start), min(b, end)
        if hi > lo:
            total += hi - lo
    return total


def person_spans(conn: sqlite3.Connection, inv_id: str, now: float) -> list[Span]:
    """While each of the person's decisions was pending: asked until decided, replaced by a newer request
    for the same decision, expired, or now."""
    spans = []
    newer: dict[tuple[str, str], float] = {}
    for r in conn.execute(
        "SELECT purpose, target, created_at, expires_at, decided_at FROM person_requests WHERE investigation_id=? "
        "ORDER BY created_at DESC",
        (inv_id,),
    ):
        key = (r["purpose"], r["target"])
        if r["decided_at"] is not None:
            end = float(r["decided_at"])
        else:
            end = min(float(r["expires_at"]), now, newer.get(key, now))
        newer[key] = float(r["created_at"])
        spans.append((float(r["created_at"]), end))
    return spans


def working_seconds(
    conn: sqlite3.Connection, inv: dict[str, Any], now: float, outside: Iterable[Span] = ()
) -> float:
    """The assistant's working time on `inv` so far: elapsed minus every wait (recorded calls, the person's
    pending decisions, and `outside` spans such as jobs)."""
    start = float(inv["created_at"])
    data = inv["data"]
    spans = [(float(a), float(b)) for a, b in data.get("waits") or []]
    spans += person_spans(conn, inv["id"], now)
    spans += [(a, min(b, now)) for a, b in outside]
    waited = covered(spans, start, now) + float(data.get("waited_folded_s") or 0.0)
    return max(0.0, now - start - waited)


def add_span(data: dict[str, Any], start: float, end: float) -> None:
    """Record a wait in an investigation's data, merged with its others and bounded in number."""
    spans = merge([*((float(a), float(b)) for a, b in data.get("waits") or []), (start, end)])
    if len(spans) > MAX_SPANS:
        old, spans = spans[:-MAX_SPANS], spans[-MAX_SPANS:]
        data["waited_folded_s"] = float(data.get("waited_folded_s") or 0.0) + sum(b - a for a, b in old)
    data["waits"] = [[round(a, 3), round(b, 3)] for a, b in spans]


def record_wait(store: Store, start: float, end: float) -> int:
    """Record that the assistant waited on the server from `start` to `end` (a tool call), on every open
    quick-pathway investigation; returns how many. Full-pathway ones need no clock."""
    if end - start < MIN_SPAN_S:
        return 0
    with sealed_tx(store) as conn:
        rows = [
            r
            for r in conn.execute(
                "SELECT id, phase, data, created_at FROM investigations WHERE pathway='quick'"
            )
            if r["phase"] not in DONE_PHASES
        ]
        for r in rows:
            if end <= float(r["created_at"]):
                continue
            data = json.loads(r["data"])
            add_span(data, max(start, float(r["created_at"])), end)
            conn.execute("UPDATE investigations SET data=? WHERE id=?", (dumps(data), r["id"]))
    return len(rows)


__all__ = ["MIN_SPAN_S", "Span", "add_span", "covered", "merge", "record_wait", "working_seconds"]

"""The quick pathway escalates on the assistant's working time, not the wall clock (issue 27.3): time spent
waiting on the server's runs (calls recorded as waits), on jobs, or on the person's pending decision is not
counted. Real sealed state in a tmp folder; the protocol's clock is moved forward by the test; the person's
requests and the server's call spans are real."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from mcp import Client
from test_protocol_helpers import Driver, make_repo, server_with_person

from trainsleuth.protocol import working
from trainsleuth.protocol.core import QUICK_PATH_LIMIT_S
from trainsleuth.protocol.gate4 import after_failed_fix
from trainsleuth.protocol.machine import Protocol
from trainsleuth.state.store import Store, default_state_path

MINUTE = 60.0


class Clock:
    """Real time plus an offset the test moves forward (the person's requests keep real times)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def _quick(ws: Path, clock: Clock, **kw: object) -> tuple[Protocol, str]:
    p = Protocol(Store(default_state_path(ws), workspace=ws), clock=clock, **kw)  # type: ignore[arg-type]
    view = p.start(
        symptom="loss NaN after the lr change", workspace=ws, reproducible="always", what_changed="lr 1 -> 10"
    )
    assert view.pathway == "quick"
    return p, view.id


def test_sixteen_minutes_of_work_escalate(tmp_path: Path) -> None:
    clock = Clock()
    p, iid = _quick(make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"}), clock)
    clock.offset = QUICK_PATH_LIMIT_S - MINUTE
    assert p.get(iid).pathway == "quick"
    clock.offset = QUICK_PATH_LIMIT_S + MINUTE
    view = p.get(iid)
    assert view.pathway == "full" and view.escalation is not None
    assert "16 minutes of work" in view.escalation["reason"] and "not counted" in view.escalation["reason"]
    assert not after_failed_fix({"data": {"escalation": view.escalation}})  # not read as a failed fix


def test_waiting_on_the_server_does_not_count(tmp_path: Path) -> None:
    clock = Clock()
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    p, iid = _quick(ws, clock)
    start = clock()
    # Ten minutes inside a tool call (a probe, a bisect, the reproducer): recorded as a wait.
    assert working.record_wait(p.store, start + MINUTE, start + 11 * MINUTE) == 1
    clock.offset = 20 * MINUTE  # 20 minutes in all, 10 of them waiting
    assert p.get(iid).pathway == "quick"
    clock.offset = 26 * MINUTE + 1  # 16 minutes of work
    assert p.get(iid).pathway == "full"
    # Short calls are not waits, and a full-pathway investigation records none.
    assert working.record_wait(p.store, start, start + 0.5) == 0
    assert working.record_wait(p.store, start, start + 5) == 0


def test_jobs_in_the_background_do_not_count(tmp_path: Path) -> None:
    clock = Clock()
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    spans: list[tuple[float, float]] = []
    p, iid = _quick(ws, clock, outside_waits=lambda since: spans)
    start = clock()
    spans.append((start + MINUTE, start + 13 * MINUTE))  # a bisect ran for twelve minutes
    clock.offset = 20 * MINUTE
    assert p.get(iid).pathway == "quick"


def test_the_persons_pending_decision_does_not_count(tmp_path: Path) -> None:
    clock = Clock()
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    p, iid = _quick(ws, clock)
    # Asked at once (real time); a newer request for the same decision replaces it; nobody answers.
    p.open_request("approve", iid, "d1", "approve d1?", "nowhere")
    p.open_request("approve", iid, "d1", "approve d1?", "nowhere")
    with p._read() as conn:
        spans = working.person_spans(conn, iid, clock() + 20 * MINUTE)
    assert len(spans) == 2 and spans[1][1] == pytest.approx(spans[0][0])  # the first ends when replaced
    clock.offset = 20 * MINUTE  # pending for its 15 minutes: 5 minutes of work
    assert p.get(iid).pathway == "quick"
    clock.offset = 31 * MINUTE + 1  # 16 minutes of work once the request expired
    assert p.get(iid).pathway == "full"


def test_spans_merge_and_stay_bounded() -> None:
    assert working.merge([(5, 8), (1, 3), (2, 4), (8, 9)]) == [(1, 4), (5, 9)]
    assert working.covered([(1, 4), (3, 9)], 2, 6) == 4
    data: dict[str, object] = {}
    for i in range(working.MAX_SPANS + 10):
        working.add_span(data, i * 10.0, i * 10.0 + 2)
    assert len(data["waits"]) == working.MAX_SPANS  # type: ignore[arg-type]
    assert data["waited_folded_s"] == pytest.approx(20.0)


@pytest.mark.anyio
async def test_a_long_tool_call_is_recorded_as_a_wait(tmp_path: Path) -> None:
    """Through the server: a call of a second or more (here the reproducer run of submit_diagnosis) is a
    wait on the open quick-pathway investigation, in its sealed record."""
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    server, _, person = server_with_person(ws)
    async with Client(server) as c:
        d = Driver(c, person)
        iid = await d.start(reproducer="sleep 1.2; grep -q '^lr = 1$' train.py")
        ev = await d.evidence(iid)
        before = time.time()
        await d.ok("submit_diagnosis", d.diagnosis(iid, ev))
    with Store(default_state_path(ws)).connect() as conn:
        data = json.loads(
            conn.execute("SELECT data FROM investigations WHERE id=?", (iid,)).fetchone()["data"]
        )
    (start, end), *_ = data["waits"]
    assert before - 1 <= start and end - start >= 1.2

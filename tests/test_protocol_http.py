"""Approval by elicitation over streamable HTTP (`trainsleuth serve --transport http`), on both
protocol revisions: the mid-call request (2025-11-25) and the input_required round (2026-07-28)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from test_protocol_helpers import Driver, make_repo
from test_server_http import http_client, http_server

pytestmark = pytest.mark.anyio


async def test_elicitation_approval_over_http_on_both_revisions(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"train.py": "lr = 10\n"})
    asked: list[str] = []

    async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(
            action="accept", content={"decision": "approve", "name": "Ann", "comment": "ok"}
        )

    with http_server(ws) as port:
        for mode, version in (("legacy", "2025-11-25"), ("auto", "2026-07-28")):
            async with http_client(port, mode=mode, elicitation_callback=approve) as c:
                assert c.protocol_version == version
                d = Driver(c)
                iid = await d.start(reproducer="grep -q '^lr = 1$' train.py")
                ev = await d.evidence(iid)
                await d.ok("submit_diagnosis", d.diagnosis(iid, ev))
                out = await d.ok(
                    "approve_diagnosis", {"investigation_id": iid, "approver": "bot", "words": "x"}
                )
                assert out["path"] == "elicitation" and out["diagnosis"]["approval"]["approver"] == "Ann"
                await d.ok("begin_fix", {"investigation_id": iid, "description": "lr 1"})
    assert len(asked) == 2

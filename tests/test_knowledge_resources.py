"""The knowledge base over MCP: resources a client can list and read, and lookup_constraints."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from trainsleuth.knowledge import catalog
from trainsleuth.knowledge.capture import append_fix_pattern
from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig

CONSTRAINTS = """\
# Constraints

## Distributed

### 4. Every rank reaches every collective

No barrier inside `if rank == 0:`; saving a checkpoint is collective.

### 4a. Frozen weights are broadcast from rank 0

DDP does not synchronise parameters with requires_grad=False.

## Numerics

### 5. Log-probabilities come from logits

Never `torch.log(torch.softmax(x))`.
"""


@pytest.mark.anyio
async def test_resources_are_listed_and_readable(workspace: Path) -> None:
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        for fid in catalog.failure_modes():
            assert f"failure-mode://{fid}" in listed
        for name in catalog.checklists():
            assert f"checklist://{name}" in listed
        for pid in catalog.fix_patterns():
            assert f"fix-pattern://{pid}" in listed
        fm = listed["failure-mode://autocast-weight-cache-stale"]
        assert fm.mime_type == "text/markdown" and fm.title and "autocast" in fm.title.lower()
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert {"failure-mode://{id}", "checklist://{name}", "fix-pattern://{id}"} <= templates

        text = (await client.read_resource("failure-mode://barrier-mismatch")).contents[0].text
        assert text.startswith("# Barrier reached by only some ranks")
        assert "`collective_mismatch`" in text and "## Fixes and their trade-offs" in text
        text = (await client.read_resource("checklist://distributed-correctness")).contents[0].text
        assert "1. [ ] **Every rank reaches every collective in the same order**" in text
        text = (await client.read_resource("fix-pattern://zero-grad-once-per-step")).contents[0].text
        assert "```python" in text and "zero_grad(set_to_none=True)" in text
        index = (await client.read_resource("knowledge://index")).contents[0].text
        assert "### distributed" in index and "checklist://reward" in index

        with pytest.raises(Exception, match="no failure mode 'not-a-thing'"):
            await client.read_resource("failure-mode://not-a-thing")
        with pytest.raises(Exception, match="no checklist"):
            await client.read_resource("checklist://nope")


@pytest.mark.anyio
async def test_project_fix_patterns_are_readable_by_id(workspace: Path) -> None:
    path = workspace / ".agents" / "knowledge" / "fix-patterns.md"
    pid = append_fix_pattern(
        path, date="2026-02-02", symptom="Hang on save", root_cause="rank-0 barrier", fix="collective save",
        lesson="collectives on all ranks", related_constraint="4",
    )  # fmt: skip
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        text = (await client.read_resource(f"fix-pattern://{pid}")).contents[0].text
        assert "- **Root Cause:** rank-0 barrier" in text and "- **Related Constraint:** 4" in text
        index = (await client.read_resource("knowledge://index")).contents[0].text
        assert f"fix-pattern://{pid}: Hang on save" in index
        with pytest.raises(Exception, match="no fix pattern 'FP-999'"):
            await client.read_resource("fix-pattern://FP-999")


@pytest.mark.anyio
async def test_lookup_constraints_tool(workspace: Path) -> None:
    kdir = workspace / ".agents" / "knowledge"
    kdir.mkdir(parents=True)
    (kdir / "constraints.md").write_text(CONSTRAINTS, encoding="utf-8")
    server, registry = build_server(ServerConfig(workspaces=[workspace]))
    assert "lookup_constraints" not in registry.placeholders
    async with Client(server) as client:
        tool = {t.name: t for t in (await client.list_tools()).tools}["lookup_constraints"]
        # It records evidence when given investigation_id, so it is not read-only; it stays offline.
        assert not tool.annotations.read_only_hint and tool.annotations.open_world_hint is False

        r = await client.call_tool(
            "lookup_constraints", {"query": "replicas disagree, frozen weights differ per rank", "limit": 6}
        )
        assert not r.is_error, r.content[0].text
        data = r.structured_content
        assert data["constraints_parsed"] == 3 and len(data["hits"]) <= 6
        first = next(h for h in data["hits"] if h["kind"] == "constraint")
        assert first["id"] == "4a" and data["hits"].index(first) <= 1
        assert first["pointer"].endswith("constraints.md:9") and "requires_grad=False" in first["text"]
        assert any(h["id"] == "unsynced-frozen-weights" for h in data["hits"])
        assert "constraint 4a: Frozen weights are broadcast from rank 0" in r.content[0].text

        text = (await client.read_resource("constraint://4a")).contents[0].text
        assert text.startswith("# Constraint 4a: Frozen weights are broadcast from rank 0")
        assert "· Distributed" in text and "requires_grad=False" in text
        with pytest.raises(Exception, match="no constraint '77'"):
            await client.read_resource("constraint://77")

        r = await client.call_tool("lookup_constraints", {"query": "#4a"})
        assert r.structured_content["exact"][0]["id"] == "4a"

        r = await client.call_tool("lookup_constraints", {"query": "NaN loss", "kinds": ["checklist"]})
        assert {h["kind"] for h in r.structured_content["hits"]} == {"checklist"}

        r = await client.call_tool("lookup_constraints", {"query": "x", "constraints_file": "missing.md"})
        assert r.is_error and "does not exist" in r.content[0].text
        r = await client.call_tool("lookup_constraints", {"query": "x", "constraints_file": "/etc/passwd"})
        assert r.is_error and "workspace" in r.content[0].text.lower()
        r = await client.call_tool("lookup_constraints", {"query": ""})
        assert r.is_error

"""Tools whose capability has not landed yet must say so plainly; nothing pretends to work."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig

# Remove a tool from this set in the same commit that makes it real.
EXPECTED_PLACEHOLDERS: set[str] = set()


def test_placeholder_list_is_current(workspace: Path) -> None:
    _, registry = build_server(ServerConfig(workspaces=[workspace]))
    assert registry.placeholders == EXPECTED_PLACEHOLDERS


@pytest.mark.anyio
async def test_placeholders_answer_not_available(workspace: Path) -> None:
    server, registry = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        for name in sorted(registry.placeholders):
            assert listed[name].description and listed[name].description.startswith("[not available yet]")
            schema = listed[name].input_schema
            args = {
                k: _dummy(v)
                for k, v in schema.get("properties", {}).items()
                if k in schema.get("required", [])
            }
            result = await client.call_tool(name, args)
            assert result.is_error, name
            assert "not available yet" in result.content[0].text, name


def _dummy(prop: dict) -> object:  # type: ignore[type-arg]
    kind = prop.get("type")
    if kind == "array":
        return ["1.0"]
    if kind == "integer":
        return 1
    return "x"

"""What the server publishes as MCP resources and prompts (protocol, checklists, failure modes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from trainsleuth.server.context import ServerContext


def register_resources(server: MCPServer, ctx: ServerContext) -> None:
    from trainsleuth.server.resources import protocol_docs

    protocol_docs.register(server, ctx)
    from trainsleuth.server.resources import knowledge_resources

    knowledge_resources.register(server, ctx)
    from trainsleuth.server.resources import probe_docs

    probe_docs.register(server, ctx)

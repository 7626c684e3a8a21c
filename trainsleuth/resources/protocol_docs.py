"""The debugging protocol itself, as a resource any client can read."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from trainsleuth.server.context import ServerContext

PROTOCOL_TEXT = """\
# The trainsleuth debugging protocol

1. Investigate: state the symptom, expected vs observed, when it started, and a reproducer.
2. Compare with what works: a known-good commit, config, environment or run.
3. Test one hypothesis at a time: 3-5 ranked hypotheses, each with what would confirm and rule it out.
4. Fix: only after a Gate-4 diagnosis is approved; change one thing; the server verifies it by
   running the reproducer. Three failed attempts halt the investigation.
5. Capture knowledge: a root-cause-analysis document, and new constraints or fix patterns.
"""


def register(server: MCPServer, ctx: ServerContext) -> None:
    @server.resource(
        "protocol://debugging",
        name="debugging-protocol",
        title="The debugging protocol",
        description="The five phases trainsleuth enforces.",
        mime_type="text/markdown",
    )
    def protocol_resource() -> str:
        return PROTOCOL_TEXT

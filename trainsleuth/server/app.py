"""Build the trainsleuth MCP server: tools, resources and prompts, with the protocol in its instructions."""

from __future__ import annotations

import logging
import sys

from mcp.server.mcpserver import MCPServer

from trainsleuth import __version__
from trainsleuth.server.context import ServerConfig, ServerContext
from trainsleuth.server.registry import ToolRegistry
from trainsleuth.server.tools import register_all

INSTRUCTIONS = """\
trainsleuth debugs machine-learning training with an enforced protocol. Root cause first:
1. start_investigation with the symptom and a reproducer command; read the suggested checklists and constraints.
2. Investigate and compare with what works: analysis tools (analyze_training_log, probe_gradients,
   compare_runs, check_resume, check_distributed, bisect_commits, ...) called with investigation_id
   store their results as evidence.
3. propose_hypotheses (3-5, ranked) and test one at a time; resolve_hypothesis citing evidence ids.
4. submit_diagnosis (Gate 4: root cause with evidence ids, mechanism, fix, side effects, what would
   disprove it). Confidence < 0.8 needs record_review CONFIRMED; a person approves before any fix.
5. begin_fix, change one thing, verify_fix (the server runs the reproducer). Three failed attempts halt
   the investigation. Finish with capture_knowledge.
"""


def configure_logging(level: int = logging.INFO) -> None:
    """Logs go to stderr, never stdout (stdout carries the stdio transport)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("trainsleuth")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def build_server(config: ServerConfig | None = None) -> tuple[MCPServer, ToolRegistry]:
    ctx = ServerContext(config or ServerConfig())
    server: MCPServer = MCPServer(
        "trainsleuth",
        title="trainsleuth",
        description="Debug ML training: root cause first, evidence before conclusions, three strikes and stop.",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
    )
    registry = ToolRegistry(server, ctx)
    register_all(registry)
    # Resources and prompts (protocol, knowledge) register themselves here as their issues land.
    from trainsleuth.resources import register_resources

    register_resources(server, ctx)
    return server, registry


def create_server(config: ServerConfig | None = None) -> MCPServer:
    return build_server(config)[0]

"""Build the trainsleuth MCP server: tools, resources and prompts, with the protocol in its instructions."""

from __future__ import annotations

import logging
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, GetPromptResult, InputRequiredResult
from mcp_types import Tool as MCPTool

from trainsleuth import __version__
from trainsleuth.protocol.ledger import ProtocolError
from trainsleuth.server.calls import RegisteredTool
from trainsleuth.server.context import ServerConfig, ServerContext
from trainsleuth.server.registry import ToolRegistry
from trainsleuth.server.results import error_result
from trainsleuth.server.schema import check_arguments, closest
from trainsleuth.server.tools import register_all

INSTRUCTIONS = """\
trainsleuth debugs machine-learning training with an enforced protocol. Root cause first:
1. start_investigation with the symptom and a reproducer command; read the suggested checklists and constraints.
2. Investigate and compare with what works: analysis tools (analyze_training_log, probe_gradients,
   compare_runs, check_resume, check_distributed, bisect_commits, ...) called with investigation_id
   store their results as evidence. Tools that run code take python (default: the project's .venv).
   Long tools answer within ~40 s: a job_id comes back if they are still running; fetch it with get_job.
3. propose_hypotheses (3-5, ranked) and test one at a time; resolve_hypothesis citing evidence ids.
4. submit_diagnosis (Gate 4: root cause with evidence ids, mechanism, the fix and its files, what would
   disprove it; a confirmed hypothesis' rule_out_if counts). Confidence < 0.8 needs record_review
   CONFIRMED; a person approves before any fix (approval begins the first fix attempt).
5. Change one thing, verify_fix (the server runs the reproducer); begin_fix before a later attempt.
   Three failed attempts halt the investigation. Finish with capture_knowledge.
"""


def configure_logging(level: int = logging.INFO) -> None:
    """Logs go to stderr, never stdout (stdout carries the stdio transport)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("trainsleuth")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


class TrainsleuthServer(MCPServer):
    """The SDK's server, with what a client sees and is told made portable and exact:

    - tools/list publishes each tool's self-contained input schema (server/schema.py);
    - a call's raw arguments are checked before the SDK could drop an unknown name: every
      problem at once, on one line, as an `isError` result (logged as a user error);
    - an unknown tool is an `isError` result that names the closest tool;
    - prompts/get of an unknown prompt, or with missing or unknown arguments, is a JSON-RPC
      invalid-params error (-32602), as is reading an unknown resource.
    """

    registry: ToolRegistry

    async def list_tools(self) -> list[MCPTool]:
        tools = await super().list_tools()
        published = self.registry.tools
        return [
            # No title (the name says it) and no output schema (results are small and bounded):
            # tools/list is paid for in every conversation.
            t.model_copy(
                update={"input_schema": published[t.name].schema, "output_schema": None, "title": None}
            )
            if t.name in published
            else t
            for t in tools
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        tool = self.registry.tools.get(name)
        if tool is None:
            hint = closest(name, sorted(self.registry.tools))
            log.info("unknown tool %r called", name)
            return error_result(
                f"Unknown tool: {name}" + (f"; did you mean {hint!r}?" if hint else ""),
                "call tools/list for the tools this server offers",
            )
        raw = dict(arguments or {})
        _, parsed, problem = check_arguments(name, tool.input_model, tool.schema, raw)
        refused = await self._precheck(tool, raw)
        if problem is not None:
            log.info("tool %s rejected arguments: %s", name, problem[:300])
            also = f"; and {refused.message}" if refused is not None else ""
            return error_result(
                problem.rstrip(".") + also,
                f"call {name} again with these fixed; its input schema (tools/list, or "
                f"`trainsleuth client describe {name}`) lists every argument"
                + (f"; {refused.next_step}" if refused is not None and refused.next_step else ""),
            )
        if refused is not None:
            log.info("tool %s refused before it ran: %s", name, refused.message[:300])
            return error_result(refused.message, refused.next_step)
        return await super().call_tool(name, parsed, context)

    async def _precheck(self, tool: RegisteredTool[Any, Any], raw: dict[str, Any]) -> ProtocolError | None:
        """The tool's own precheck (a gate that names every problem at once), never failing the call."""
        if tool.precheck is None:
            return None
        import anyio.to_thread

        try:
            check = tool.precheck
            return await anyio.to_thread.run_sync(lambda: check(raw, self.registry.ctx))
        except Exception:
            log.exception("the precheck of %s failed; the tool checks again when it runs", tool.name)
            return None

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context[Any, Any] | None = None
    ) -> GetPromptResult | InputRequiredResult:
        prompts = {p.name: p for p in await self.list_prompts()}
        prompt = prompts.get(name)
        if prompt is None:
            hint = closest(name, sorted(prompts))
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"Unknown prompt: {name}"
                + (f"; did you mean {hint!r}?" if hint else "")
                + f" (prompts: {', '.join(sorted(prompts))})",
                data={"prompt": name},
            )
        declared = {a.name: a for a in prompt.arguments or []}
        given = dict(arguments or {})
        problems = [
            f"{key}: unknown argument"
            + (f"; did you mean {closest(key, list(declared))!r}?" if declared else "")
            for key in given
            if key not in declared
        ]
        missing = [a for a, spec in declared.items() if spec.required and a not in given]
        if missing:
            problems.insert(0, "missing required: " + ", ".join(missing))
        if problems:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"Invalid arguments for prompt {name}: " + "; ".join(problems),
                data={"prompt": name, "arguments": sorted(declared)},
            )
        return await super().get_prompt(name, arguments, context)


log = logging.getLogger("trainsleuth")


def build_server(config: ServerConfig | None = None) -> tuple[MCPServer, ToolRegistry]:
    ctx = ServerContext(config or ServerConfig())
    server = TrainsleuthServer(
        "trainsleuth",
        title="trainsleuth",
        description="Debug ML training: root cause first, evidence before conclusions, three strikes and stop.",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
    )
    registry = ToolRegistry(server, ctx)
    server.registry = registry
    register_all(registry)
    # Resources and prompts (protocol, knowledge) register themselves here as their issues land.
    from trainsleuth.server.resources import register_resources

    register_resources(server, ctx)
    _register_results(server, ctx)
    return server, registry


def _register_results(server: MCPServer, ctx: ServerContext) -> None:
    @server.resource(
        "result://{name}",
        name="result",
        title="A full tool result",
        description="A tool result too large to return whole; its cut result names it in full_result.",
        mime_type="application/json",
    )
    def full_result(name: str) -> str:
        from mcp.server.mcpserver.exceptions import ResourceNotFoundError

        from trainsleuth.server.results import read_result

        try:
            return read_result(ctx.workspace_files, name)
        except OSError:
            raise ResourceNotFoundError(
                f"no stored result {name!r}; use the uri given in a cut result's full_result"
            ) from None


def create_server(config: ServerConfig | None = None) -> MCPServer:
    return build_server(config)[0]

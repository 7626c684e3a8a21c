"""What a tool handler works with: its argument markers and models, the call object, the
failures it may raise, and how its result becomes text and evidence.

Handlers and the job runner (`server/jobrunner.py`, `server/longrun.py`) need these without the
registry that declares tools, so they live here; `server/registry.py` builds on them.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Generic, TypeVar

import anyio
import anyio.from_thread
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import BaseModel, ConfigDict, Field

from trainsleuth.protocol.ledger import ProtocolError, record_open_evidence, record_tool_evidence
from trainsleuth.server.context import ServerContext
from trainsleuth.server.results import build_result
from trainsleuth.server.workspace import PolicyError
from trainsleuth.state.store import StoreError

if TYPE_CHECKING:
    from trainsleuth.tools.jobs import JobHandle

log = logging.getLogger("trainsleuth")

# ---------------------------------------------------------------------------- argument markers


@dataclass(frozen=True)
class PathArg:
    """Marks a field as a filesystem path that must resolve inside a workspace. With `read_only`,
    the tool only reads it, so it may also lie outside the workspaces (see `server/workspace.py`)."""

    must_exist: bool = False
    read_only: bool = False
    # For an optional path: what leaving it out does, added to a refusal of the value given.
    when_left_out: str = ""


@dataclass(frozen=True)
class RefArg:
    """Marks a field that is passed to git as a ref (or option): it may not begin with '-'."""


@dataclass(frozen=True)
class EntrypointArg:
    """Marks a probe entrypoint (`file.py:function` or `package.module:function`): a file part must
    exist inside a workspace and is replaced by its resolved path; a module part is kept as given."""


WorkspacePath = Annotated[str, PathArg()]
ExistingPath = Annotated[str, PathArg(must_exist=True)]
# An existing file or folder the tool only reads: allowed outside the workspaces, never written there.
ReadPath = Annotated[str, PathArg(must_exist=True, read_only=True)]
GitRef = Annotated[str, RefArg()]
Entrypoint = Annotated[str, EntrypointArg()]


class ToolInput(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AnalysisInput(ToolInput):
    # Described once in the server's instructions, not on every tool (tools/list stays small).
    investigation_id: str | None = None


class ToolOutput(BaseModel):
    def render_text(self) -> str:
        """Readable rendering for the text content block; override for something nicer than JSON."""
        return json.dumps(self.model_dump(mode="json", exclude_none=True), indent=2)


class AnalysisOutput(ToolOutput):
    evidence_id: str | None = Field(
        default=None, description="Evidence id on the investigation, when investigation_id was given."
    )

    def evidence_summary(self) -> str:
        """One line stored as the evidence summary."""
        return self.render_text().splitlines()[0][:300] if self.render_text() else type(self).__name__


class ToolFailure(Exception):
    """An expected failure: becomes an `isError` result with the message and the next step."""

    def __init__(self, message: str, next_step: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.next_step = next_step


def expected_failure(exc: BaseException, ctx: ServerContext) -> tuple[str, str | None] | None:
    """(message, next step) for the failures a user can act on; None for a bug."""
    if isinstance(exc, PolicyError):
        where = ", ".join(str(ws) for ws in ctx.policy.workspaces)
        return (
            f"Refused by workspace policy: {exc}",
            exc.next_step or f"pass a value inside the workspace ({where}) that satisfies the rule above",
        )
    if isinstance(exc, (ToolFailure, ProtocolError)):
        return exc.message, exc.next_step
    if isinstance(exc, StoreError):
        return (
            f"the state store is unavailable: {exc}",
            "make the workspace writable, or start the server with --state PATH on a writable disk",
        )
    return None


# ---------------------------------------------------------------------------- pagination


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode()


def decode_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode()
        if not text.startswith("o:"):
            raise ValueError
        offset = int(text[2:])
        if offset < 0:
            raise ValueError
        return offset
    except ValueError:
        raise ToolFailure(
            f"cursor {cursor!r} is not a cursor this server issued", "repeat the call without a cursor"
        ) from None


T = TypeVar("T")


def paginate(items: list[T], cursor: str | None, limit: int) -> tuple[list[T], str | None]:
    """Return one page and the cursor of the next page (None at the end)."""
    offset = decode_cursor(cursor)
    page = items[offset : offset + limit]
    nxt = offset + limit
    return page, (encode_cursor(nxt) if nxt < len(items) else None)


# ---------------------------------------------------------------------------- the call object


@dataclass
class ToolCall:
    name: str
    ctx: ServerContext
    mcp_ctx: Context | None
    cancel_event: threading.Event = field(default_factory=threading.Event)
    resolved: dict[str, Any] = field(default_factory=dict)
    images: list[bytes] = field(default_factory=list)
    # Set when the call runs as a job (long_running tools): register cleanups, check cancellation.
    job: JobHandle | None = None
    # Read-only inputs outside the workspaces this call was given: (field, path).
    outside_reads: list[tuple[str, str]] = field(default_factory=list)
    progress_sink: Callable[[float, float | None, str | None], None] | None = None
    # Lines appended to the text result (e.g. an optional extra that is missing).
    notes: list[str] = field(default_factory=list)
    _in_thread: bool = False

    def add_image(self, png: bytes) -> None:
        """Attach a PNG; it is returned as MCP image content after the text."""
        self.images.append(png)

    def add_plot(self, make: Callable[[], bytes | None]) -> None:
        """Attach the PNG `make()` draws; without the [plots] extra, say so in the result instead."""
        from trainsleuth.tools.extras import MissingExtra

        try:
            png = make()
        except MissingExtra as exc:
            self.notes.append(f"No plot: {exc.message}")
            return
        if png:
            self.images.append(png)

    def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress to the client (a no-op when it sent no progress token)."""
        if self.progress_sink is not None:
            self.progress_sink(done, total, message)
            return
        if self.mcp_ctx is None:
            return
        report = self.mcp_ctx.report_progress
        try:
            if self._in_thread:
                anyio.from_thread.run(report, done, total, message)
        except Exception:  # progress is best effort; never fail a tool because of it
            log.debug("progress notification failed", exc_info=True)

    async def aprogress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        if self.mcp_ctx is not None:
            try:
                await self.mcp_ctx.report_progress(done, total, message)
            except Exception:
                log.debug("progress notification failed", exc_info=True)


InT = TypeVar("InT", bound=ToolInput)
OutT = TypeVar("OutT", bound=ToolOutput)

SyncHandler = Callable[[Any, ToolCall], ToolOutput]
AsyncHandler = Callable[[Any, ToolCall], Awaitable[ToolOutput]]
# (output, arguments, call) -> output: what only the server process that delivers a job's result can do.
FinishHandler = Callable[[Any, Any, ToolCall], ToolOutput]
# (raw arguments, context) -> what the tool would refuse, checked before the schema's refusal is sent and
# before anything runs, so one refusal names every problem (None: nothing to refuse).
Precheck = Callable[[dict[str, Any], ServerContext], ProtocolError | None]


@dataclass
class RegisteredTool(Generic[InT, OutT]):
    name: str
    input_model: type[ToolInput]
    output_model: type[ToolOutput]
    placeholder: bool = False
    issue: int | None = None
    handler: Callable[..., Any] | None = None
    schema: dict[str, Any] = field(default_factory=dict)
    long_running: bool = False
    hints: dict[str, bool] = field(default_factory=dict)
    # long_running only: the argument whose value at most one running job may hold at a time
    # (e.g. investigation_id), and the step run in the server process when the result is delivered.
    one_job_per: str | None = None
    finish: FinishHandler | None = None
    precheck: Precheck | None = None


# ---------------------------------------------------------------------------- results


def outside_note(outside: list[tuple[str, str]]) -> str:
    if not outside:
        return ""
    listed = ", ".join(f"{name}={path}" for name, path in outside)
    return f"\nRead-only input outside the workspace: {listed} (read, never written or executed there)."


def render_output(out: ToolOutput, call: ToolCall) -> str:
    text = out.render_text()
    evidence_id = out.evidence_id if isinstance(out, AnalysisOutput) else None
    already = evidence_id is not None and any(evidence_id in note for note in call.notes)
    if isinstance(out, AnalysisOutput) and out.evidence_id and out.evidence_id not in text and not already:
        text += f"\nStored as evidence {out.evidence_id}."
    return text + outside_note(call.outside_reads) + "".join(f"\n{note}" for note in call.notes)


def success_result(out: ToolOutput, call: ToolCall) -> CallToolResult:
    cfg = call.ctx.config
    return build_result(
        call.name,
        out.model_dump(mode="json", by_alias=True),
        render_output(out, call),
        call.images,
        state_dir=call.ctx.workspace_files,
        max_text_chars=cfg.max_text_chars,
        max_structured_chars=cfg.max_structured_chars,
    )


# Tools whose results are a view of a job (its status, or a result recorded once: see get_job).
_NOT_AUTO_EVIDENCE = frozenset({"get_job", "cancel_job"})


def record_evidence_for(out: ToolOutput, args: BaseModel, call: ToolCall) -> None:
    """Store an analysis result as evidence: on the investigation the call named, else (issue 22.3) on the
    workspace's one open investigation, saying so; never failing the tool over the latter."""
    if not isinstance(out, AnalysisOutput) or call.name in _NOT_AUTO_EVIDENCE:
        return  # a job's status or result: get_job keeps a finished job's result as evidence itself
    investigation_id = getattr(args, "investigation_id", None)
    if investigation_id:
        out.evidence_id = record_tool_evidence(
            call.ctx.store, investigation_id, call.name, out.evidence_summary(), out.model_dump(mode="json")
        )
        return
    if getattr(out, "status", None) == "running":
        return
    try:
        if not call.ctx.state_path.exists():
            return
        evidence_id, note = record_open_evidence(
            call.ctx.store, call.name, out.evidence_summary(), out.model_dump(mode="json")
        )
    except (ProtocolError, StoreError) as exc:
        call.notes.append(f"(not stored as evidence: {getattr(exc, 'message', exc)})")
        return
    out.evidence_id = evidence_id
    if note:
        call.notes.append(f"({note})")

"""How every trainsleuth tool is declared: pydantic in, pydantic out, honest annotations,
workspace-checked paths, bounded text, errors as `isError` results that name the next step.

A handler is a plain function `handler(args, call) -> OutputModel`. Sync handlers run in a
worker thread (they may block on subprocesses); when the MCP call is cancelled,
`call.cancel_event` is set so the handler's child processes are killed.
"""

from __future__ import annotations

import base64
import inspect
import json
import logging
import os
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Generic, TypeVar, get_args, get_origin

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ImageContent, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from trainsleuth.protocol.ledger import ProtocolError, record_tool_evidence
from trainsleuth.protocol.store import StoreError
from trainsleuth.server.context import ServerContext
from trainsleuth.server.workspace import PolicyError, check_ref

log = logging.getLogger("trainsleuth")

# ---------------------------------------------------------------------------- argument markers


@dataclass(frozen=True)
class PathArg:
    """Marks a field as a filesystem path that must resolve inside a workspace."""

    must_exist: bool = False


@dataclass(frozen=True)
class RefArg:
    """Marks a field that is passed to git as a ref (or option): it may not begin with '-'."""


@dataclass(frozen=True)
class EntrypointArg:
    """Marks a probe entrypoint (`file.py:function` or `package.module:function`): a file part must
    exist inside a workspace and is replaced by its resolved path; a module part is kept as given."""


WorkspacePath = Annotated[str, PathArg()]
ExistingPath = Annotated[str, PathArg(must_exist=True)]
GitRef = Annotated[str, RefArg()]
Entrypoint = Annotated[str, EntrypointArg()]


class ToolInput(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AnalysisInput(ToolInput):
    investigation_id: str | None = Field(
        default=None, description="If given, the result is stored as evidence on this investigation."
    )


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


# ---------------------------------------------------------------------------- pagination and bounds


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


def bound_text(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    note = (
        f"\n… [truncated: {len(text) - limit} more characters; the structured output has the data, "
        "and list fields are paginated with a cursor]"
    )
    return text[: max(0, limit - len(note))] + note


# ---------------------------------------------------------------------------- the call object


@dataclass
class ToolCall:
    name: str
    ctx: ServerContext
    mcp_ctx: Context | None
    cancel_event: threading.Event = field(default_factory=threading.Event)
    resolved: dict[str, Any] = field(default_factory=dict)
    images: list[bytes] = field(default_factory=list)
    _in_thread: bool = False

    def add_image(self, png: bytes) -> None:
        """Attach a PNG; it is returned as MCP image content after the text."""
        self.images.append(png)

    def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress to the client (a no-op when it sent no progress token)."""
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


@dataclass
class RegisteredTool(Generic[InT, OutT]):
    name: str
    input_model: type[ToolInput]
    output_model: type[ToolOutput]
    placeholder: bool = False
    issue: int | None = None


# ---------------------------------------------------------------------------- policy application


def _markers(annotation: Any, metadata: list[Any]) -> list[Any]:
    kinds = (PathArg, RefArg, EntrypointArg)
    found = [m for m in metadata if isinstance(m, kinds)]
    if get_origin(annotation) is Annotated:
        found += [m for m in get_args(annotation)[1:] if isinstance(m, kinds)]
    for arg in get_args(annotation):
        if arg is not type(None):
            found += _markers(arg, [])
    return found


def _apply_marker(value: Any, marker: Any, ctx: ServerContext, field_name: str) -> Any:
    if value is None:
        return None
    if isinstance(value, list):
        return [_apply_marker(v, marker, ctx, f"{field_name}[{i}]") for i, v in enumerate(value)]
    if isinstance(marker, PathArg):
        return str(ctx.policy.resolve(value, field=field_name, must_exist=marker.must_exist))
    if isinstance(marker, EntrypointArg):
        return check_entrypoint(value, ctx, field_name)
    return check_ref(value, field=field_name)


def check_entrypoint(value: str, ctx: ServerContext, field_name: str = "entrypoint") -> str:
    target, sep, func = value.rpartition(":")
    if not sep and value.endswith(".py"):
        raise PolicyError(
            f"{field_name}: {value!r} must look like path/to/file.py:function: it names a file, not the "
            "function that returns {'model': ..., 'batch': ...} (resource probe://entrypoint)",
            f"to probe a training script as it is, pass scaffold={value!r} instead of {field_name}",
        )
    if not sep or not target or not func or value.startswith("-"):
        raise PolicyError(
            f"{field_name}: {value!r} must look like path/to/file.py:function or package.module:function",
            "pass e.g. train.py:make_probe (a function that returns the entrypoint mapping)",
        )
    if target.endswith(".py") or "/" in target or os.sep in target:
        try:
            resolved = ctx.policy.resolve(target, field=field_name, must_exist=True)
        except PolicyError as exc:
            raise PolicyError(
                str(exc), "pass the path of an existing .py file inside the workspace"
            ) from None
        return f"{resolved}:{func}"
    if not all(part.isidentifier() for part in target.split(".")) or not func.isidentifier():
        raise PolicyError(f"{field_name}: {value!r} is not a valid package.module:function")
    return value


def apply_policy(args: BaseModel, ctx: ServerContext) -> BaseModel:
    """Resolve every path field and check every ref field (recursing into nested models)."""
    updates: dict[str, Any] = {}
    for name, info in type(args).model_fields.items():
        value = getattr(args, name)
        markers = _markers(info.annotation, list(info.metadata))
        if markers:
            updates[name] = _apply_marker(value, markers[0], ctx, name)
        elif isinstance(value, BaseModel):
            updates[name] = apply_policy(value, ctx)
        elif isinstance(value, list) and value and isinstance(value[0], BaseModel):
            updates[name] = [apply_policy(v, ctx) for v in value]
    return args.model_copy(update=updates) if updates else args


# ---------------------------------------------------------------------------- results


def error_result(message: str, next_step: str | None = None) -> CallToolResult:
    text = message if not next_step else f"{message}\nNext step: {next_step}"
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def _success_result(out: ToolOutput, call: ToolCall) -> CallToolResult:
    text = out.render_text()
    if isinstance(out, AnalysisOutput) and out.evidence_id and out.evidence_id not in text:
        text += f"\nStored as evidence {out.evidence_id}."
    text = bound_text(text, call.ctx.config.max_text_chars)
    content: list[Any] = [TextContent(type="text", text=text)]
    for png in call.images:
        content.append(ImageContent(type="image", data=base64.b64encode(png).decode(), mime_type="image/png"))
    return CallToolResult(content=content, structured_content=out.model_dump(mode="json", by_alias=True))


# ---------------------------------------------------------------------------- registration


class ToolRegistry:
    def __init__(self, server: MCPServer, ctx: ServerContext) -> None:
        self.server = server
        self.ctx = ctx
        self.tools: dict[str, RegisteredTool[Any, Any]] = {}

    @property
    def placeholders(self) -> set[str]:
        return {name for name, t in self.tools.items() if t.placeholder}

    def add(
        self,
        name: str,
        handler: SyncHandler | AsyncHandler,
        *,
        input_model: type[ToolInput],
        output_model: type[ToolOutput],
        description: str,
        title: str,
        read_only: bool,
        destructive: bool,
        idempotent: bool,
        open_world: bool,
        resolved: dict[str, Any] | None = None,
        placeholder: bool = False,
        issue: int | None = None,
    ) -> None:
        """Register a tool. All four annotation hints are required so each is chosen deliberately."""
        is_async = inspect.iscoroutinefunction(handler)
        resolved = resolved or {}
        ctx = self.ctx

        async def tool_fn(**kwargs: Any) -> Any:
            mcp_ctx: Context = kwargs.pop("ctx")
            call = ToolCall(name=name, ctx=ctx, mcp_ctx=mcp_ctx)
            call.resolved = {k: kwargs.pop(k) for k in list(resolved) if k in kwargs}
            try:
                args = apply_policy(input_model.model_validate(kwargs), ctx)
                if is_async:
                    out = await handler(args, call)  # type: ignore[misc]
                else:
                    call._in_thread = True
                    try:
                        out = await anyio.to_thread.run_sync(
                            lambda: handler(args, call), abandon_on_cancel=True
                        )
                    except anyio.get_cancelled_exc_class():
                        call.cancel_event.set()
                        raise
                investigation_id = getattr(args, "investigation_id", None)
                if investigation_id and isinstance(out, AnalysisOutput):
                    summary = out.evidence_summary()
                    data = out.model_dump(mode="json")
                    out.evidence_id = await anyio.to_thread.run_sync(
                        lambda: record_tool_evidence(ctx.store, investigation_id, name, summary, data)
                    )
                return _success_result(out, call)
            except PolicyError as exc:
                where = ", ".join(str(ws) for ws in ctx.policy.workspaces)
                return error_result(
                    f"Refused by workspace policy: {exc}",
                    exc.next_step
                    or f"pass a value inside the workspace ({where}) that satisfies the rule above",
                )
            except ToolFailure as exc:
                return error_result(exc.message, exc.next_step)
            except ProtocolError as exc:
                return error_result(exc.message, exc.next_step)
            except StoreError as exc:
                return error_result(
                    f"the state store is unavailable: {exc}",
                    "make the workspace writable, or start the server with --state PATH on a writable disk",
                )
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as exc:
                log.exception("tool %s failed unexpectedly", name)
                return error_result(
                    f"{name} failed unexpectedly: {type(exc).__name__}: {exc}",
                    "check the arguments; if they are right this is a trainsleuth bug (details in the server log)",
                )

        params = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
        annotations: dict[str, Any] = {"ctx": Context}
        for fname, info in input_model.model_fields.items():
            ann = (
                Annotated[info.annotation, Field(description=info.description)]
                if info.description
                else info.annotation
            )
            default = (
                inspect.Parameter.empty if info.is_required() else info.get_default(call_default_factory=True)
            )
            params.append(
                inspect.Parameter(fname, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=ann)
            )
            annotations[fname] = ann
        for rname, rann in resolved.items():
            params.append(inspect.Parameter(rname, inspect.Parameter.KEYWORD_ONLY, annotation=rann))
            annotations[rname] = rann
        ret = Annotated[CallToolResult, output_model]
        tool_fn.__signature__ = inspect.Signature(params, return_annotation=ret)  # type: ignore[attr-defined]
        tool_fn.__annotations__ = {**annotations, "return": ret}
        tool_fn.__name__ = name
        tool_fn.__doc__ = description

        self.server.add_tool(
            tool_fn,
            name=name,
            title=title,
            description=description,
            annotations=ToolAnnotations(
                title=title,
                read_only_hint=read_only,
                destructive_hint=destructive,
                idempotent_hint=idempotent,
                open_world_hint=open_world,
            ),
        )
        self.tools[name] = RegisteredTool(
            name, input_model, output_model, placeholder=placeholder, issue=issue
        )

    def placeholder(
        self,
        name: str,
        *,
        input_model: type[ToolInput],
        description: str,
        title: str,
        issue: int,
        read_only: bool = True,
        destructive: bool = False,
        idempotent: bool = True,
        open_world: bool = False,
    ) -> None:
        """Register a tool whose capability lands in a later issue: it validates its arguments
        (paths and refs included) and then answers plainly that it is not available yet."""

        def handler(args: ToolInput, call: ToolCall) -> ToolOutput:
            raise ToolFailure(
                f"{name} is not available yet in this version of trainsleuth (planned in issue {issue}).",
                "use the tools that are available, or record_evidence with what you observed yourself",
            )

        self.add(
            name,
            handler,
            input_model=input_model,
            output_model=PlaceholderOutput,
            description=f"[not available yet] {description}",
            title=title,
            read_only=read_only,
            destructive=destructive,
            idempotent=idempotent,
            open_world=open_world,
            placeholder=True,
            issue=issue,
        )


class PlaceholderOutput(ToolOutput):
    message: str = ""


__all__ = [
    "AnalysisInput",
    "AnalysisOutput",
    "Entrypoint",
    "ExistingPath",
    "GitRef",
    "PathArg",
    "RefArg",
    "ToolCall",
    "ToolFailure",
    "ToolInput",
    "ToolOutput",
    "ToolRegistry",
    "WorkspacePath",
    "bound_text",
    "error_result",
    "paginate",
]

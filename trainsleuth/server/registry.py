"""How every trainsleuth tool is declared: pydantic in, pydantic out, honest annotations,
workspace-checked paths, bounded results, errors as `isError` results that name the next step.

A handler is a plain function `handler(args, call) -> OutputModel`. Sync handlers run in a
worker thread (they may block on subprocesses); when the MCP call is cancelled,
`call.cancel_event` is set so the handler's child processes are killed.

What a client sees is built here too: the published input schema (`server/schema.py`), no
output schema (results are small and bounded instead, `server/results.py`), and arguments
checked before anything can drop them. A tool declared `long_running=True` runs as a job in a
process of its own (`server/longrun.py`): the call waits up to ~40 s with progress, then hands
back a job id for `get_job`. What a handler itself works with (argument markers, input and output
models, `ToolCall`, `ToolFailure`) is in `server/calls.py`.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from typing import Annotated, Any, get_args, get_origin

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from trainsleuth.protocol.working import MIN_SPAN_S, record_wait
from trainsleuth.server.calls import (
    AnalysisInput,
    AnalysisOutput,
    AsyncHandler,
    Entrypoint,
    EntrypointArg,
    ExistingPath,
    FinishHandler,
    GitRef,
    PathArg,
    Precheck,
    ReadPath,
    RefArg,
    RegisteredTool,
    SyncHandler,
    ToolCall,
    ToolFailure,
    ToolInput,
    ToolOutput,
    WorkspacePath,
    expected_failure,
    paginate,
    record_evidence_for,
    success_result,
)
from trainsleuth.server.context import ServerContext
from trainsleuth.server.results import bound_text, error_result
from trainsleuth.server.schema import published_schema
from trainsleuth.server.workspace import PolicyError, check_ref

log = logging.getLogger("trainsleuth")

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


def _apply_marker(
    value: Any,
    marker: Any,
    ctx: ServerContext,
    field_name: str,
    outside: list[tuple[str, str]],
    notes: list[str] | None = None,
) -> Any:
    if value is None:
        return None
    if isinstance(value, list):
        return [
            _apply_marker(v, marker, ctx, f"{field_name}[{i}]", outside, notes) for i, v in enumerate(value)
        ]
    if isinstance(marker, PathArg) and marker.when_left_out:
        try:
            return _apply_marker(
                value, PathArg(marker.must_exist, marker.read_only), ctx, field_name, outside
            )
        except PolicyError as exc:
            if notes is not None and not marker.read_only:
                # an optional place to write: an honest call is not refused for it; the tool uses what
                # leaving it out does, and the answer says so (blind runs: rca_dir=/tmp/... was refused)
                notes.append(f"({field_name} {value!r} not used: {exc}; {marker.when_left_out})")
                return None
            hint = f"or leave {field_name} out: {marker.when_left_out}"
            raise PolicyError(str(exc), f"{exc.next_step}; {hint}" if exc.next_step else hint) from None
    if isinstance(marker, PathArg):
        if marker.read_only:
            path, is_outside = ctx.policy.resolve_read(
                value, field=field_name, must_exist=marker.must_exist, outside_reads=ctx.config.outside_reads
            )
            if is_outside:
                outside.append((field_name, str(path)))
            return str(path)
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
                str(exc), exc.next_step or "pass the path of an existing .py file inside the workspace"
            ) from None
        return f"{resolved}:{func}"
    if not all(part.isidentifier() for part in target.split(".")) or not func.isidentifier():
        raise PolicyError(f"{field_name}: {value!r} is not a valid package.module:function")
    return value


def apply_policy(
    args: BaseModel,
    ctx: ServerContext,
    outside: list[tuple[str, str]] | None = None,
    notes: list[str] | None = None,
) -> BaseModel:
    """Resolve every path field and check every ref field (recursing into nested models).

    Read-only inputs found outside the workspaces are appended to `outside` as (field, path); with `notes`,
    an optional output path that cannot be used is left out (what leaving it out does) and said there.
    """
    outside = outside if outside is not None else []
    updates: dict[str, Any] = {}
    for name, info in type(args).model_fields.items():
        value = getattr(args, name)
        markers = _markers(info.annotation, list(info.metadata))
        if markers:
            updates[name] = _apply_marker(value, markers[0], ctx, name, outside, notes)
        elif isinstance(value, BaseModel):
            updates[name] = apply_policy(value, ctx, outside, notes)
        elif isinstance(value, list) and value and isinstance(value[0], BaseModel):
            updates[name] = [apply_policy(v, ctx, outside, notes) for v in value]
    return args.model_copy(update=updates) if updates else args


# ---------------------------------------------------------------------------- registration

# The MCP defaults of the four hints: a hint equal to its default is left out of tools/list.
HINT_DEFAULTS = {
    "read_only_hint": False,
    "destructive_hint": True,
    "idempotent_hint": False,
    "open_world_hint": True,
}


def published_annotations(
    read_only: bool, destructive: bool, idempotent: bool, open_world: bool
) -> ToolAnnotations | None:
    """The four hints as chosen, publishing only those that differ from the spec's defaults
    (a client applies the defaults to the others, so the meaning is exactly the same). The spec
    gives destructiveHint and idempotentHint meaning only when readOnlyHint is false, so a
    read-only tool publishes neither; no hint to publish, no annotations at all."""
    chosen = {
        "read_only_hint": read_only,
        "destructive_hint": destructive,
        "idempotent_hint": idempotent,
        "open_world_hint": open_world,
    }
    if read_only:
        del chosen["destructive_hint"], chosen["idempotent_hint"]
    differing = {k: v for k, v in chosen.items() if v != HINT_DEFAULTS[k]}
    return ToolAnnotations(**differing) if differing else None


def record_waiting(ctx: ServerContext, started: float, ended: float) -> None:
    """Record a long call as time the assistant waited (protocol/working.py); never fails the call."""
    try:
        if ctx.state_path.exists():
            record_wait(ctx.store, started, ended)
    except Exception:
        log.debug("could not record the wait of a call", exc_info=True)


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
        long_running: bool = False,
        one_job_per: str | None = None,
        finish: FinishHandler | None = None,
        precheck: Precheck | None = None,
        resolved: dict[str, Any] | None = None,
        placeholder: bool = False,
        issue: int | None = None,
    ) -> None:
        """Register a tool. All four annotation hints are required so each is chosen deliberately.

        `long_running=True`: the handler may take minutes; it runs as a job in its own process
        (so it survives the call and the server), the call waits up to ~40 s sending progress,
        then returns a job id for `get_job`. The handler must be a module-level function; it
        finds its job handle in `call.job` (cleanups, cancellation).

        `one_job_per="investigation_id"`: while a job holds that argument's value, another call
        with the same value is refused naming the job (and the protocol's next steps point to it).
        `finish(out, args, call)`: a module-level function run once in the server process that
        delivers the result (to the waiting call or to get_job), with the live client: what the job
        process cannot do (ask the person through the server's own terminal, read the client's
        capabilities, restate the next step as it is now).
        `precheck(raw_arguments, ctx)`: what the tool would refuse, checked before anything runs (and
        named together with the schema's own problems): a gate that must see every problem at once.
        """
        is_async = inspect.iscoroutinefunction(handler)
        if read_only and (long_running or issubclass(input_model, AnalysisInput)):
            raise ValueError(
                f"{name}: a tool that records evidence or jobs writes state, so read_only must be False"
            )
        if long_running and (is_async or "<locals>" in getattr(handler, "__qualname__", "<locals>")):
            raise ValueError(f"{name}: a long_running handler must be a module-level sync function")
        if (one_job_per or finish) and not long_running:
            raise ValueError(f"{name}: one_job_per and finish apply to long_running tools only")
        if finish is not None and "<locals>" in getattr(finish, "__qualname__", "<locals>"):
            raise ValueError(f"{name}: finish must be a module-level function")
        if one_job_per is not None and one_job_per not in input_model.model_fields:
            raise ValueError(f"{name}: one_job_per names {one_job_per!r}, which is not an argument")
        resolved = resolved or {}
        ctx = self.ctx
        tool: RegisteredTool[Any, Any] = RegisteredTool(
            name,
            input_model,
            output_model,
            placeholder=placeholder,
            issue=issue,
            handler=handler,
            schema=published_schema(input_model),
            long_running=long_running,
            one_job_per=one_job_per,
            finish=finish,
            precheck=precheck,
            hints={
                "read_only_hint": read_only,
                "destructive_hint": destructive,
                "idempotent_hint": idempotent,
                "open_world_hint": open_world,
            },
        )

        async def tool_fn(**kwargs: Any) -> Any:
            started = time.time()
            result = await run_call(**kwargs)
            ended = time.time()
            if ended - started >= MIN_SPAN_S:  # the assistant waited on the server: not working time
                await anyio.to_thread.run_sync(lambda: record_waiting(ctx, started, ended))
            return result

        async def run_call(**kwargs: Any) -> Any:
            mcp_ctx: Context = kwargs.pop("ctx")
            call = ToolCall(name=name, ctx=ctx, mcp_ctx=mcp_ctx)
            call.resolved = {k: kwargs.pop(k) for k in list(resolved) if k in kwargs}
            args: BaseModel | None = None
            try:
                args = apply_policy(input_model.model_validate(kwargs), ctx, call.outside_reads, call.notes)
                if long_running:
                    from trainsleuth.server.longrun import run_as_job

                    return await run_as_job(tool, args, call)
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
                await anyio.to_thread.run_sync(lambda: record_evidence_for(out, args, call))
                return await anyio.to_thread.run_sync(lambda: success_result(out, call))
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as exc:
                expected = expected_failure(exc, ctx)
                if expected is None:
                    log.exception("tool %s failed unexpectedly", name)
                    return error_result(
                        f"{name} failed unexpectedly: {type(exc).__name__}: {exc}",
                        "check the arguments; if they are right this is a trainsleuth bug (details in the server log)",
                    )
                log.info("tool %s refused: %s", name, expected[0].splitlines()[0][:300])
                message, next_step = expected
                held = getattr(args, "investigation_id", None) if args is not None else None
                if held and not long_running:
                    from trainsleuth.server.longrun import running_note

                    note = await anyio.to_thread.run_sync(lambda: running_note(ctx, "investigation_id", held))
                    if note:
                        next_step = f"{note}; then: {next_step}" if next_step else note
                return error_result(message, next_step)

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
        # No output schema: results are bounded and may be cut (see server/results.py); clients read
        # the text or the structured content, and tools/list stays small.
        tool_fn.__signature__ = inspect.Signature(params, return_annotation=CallToolResult)  # type: ignore[attr-defined]
        tool_fn.__annotations__ = {**annotations, "return": CallToolResult}
        tool_fn.__name__ = name
        tool_fn.__doc__ = description

        self.server.add_tool(
            tool_fn,
            name=name,
            title=title,
            description=description,
            annotations=published_annotations(read_only, destructive, idempotent, open_world),
        )
        self.tools[name] = tool

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
    "ReadPath",
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

"""Long tool calls answer within the clients' request timeouts (most give up at 60 s).

A tool registered with `long_running=True` runs as a job in a process of its own
(`trainsleuth.server.jobrunner`), so it survives the call and the server that started it (a
per-call server of `trainsleuth client call` included). The call waits up to `call_wait_s`
(40 s by default; less with the tool's own `wait_s`, at once with `background`), relaying the
job's progress as MCP progress notifications. Finished in time, the call returns the tool's own
result; else it returns the job id and how to fetch the result with `get_job`.

While the call waits, it is the job's *waiter*: a call that is cancelled, or whose server dies
(a client that disconnected), cancels the job, which kills its processes and removes its
worktrees at once. Once the call has returned the job id, the job goes on alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from mcp_types import CallToolResult
from pydantic import BaseModel

from trainsleuth.server.context import ServerConfig, ServerContext
from trainsleuth.server.results import build_result, error_result
from trainsleuth.tools.job_records import CANCELLED, FAILED, INTERRUPTED, SUCCEEDED, JobRecord
from trainsleuth.tools.jobs import JobManager, manager_for

if TYPE_CHECKING:
    from trainsleuth.server.calls import RegisteredTool, ToolCall

log = logging.getLogger("trainsleuth")

RUNNER_MODULE = "trainsleuth.server.jobrunner"
POLL_S = 0.2
# With background=true the call still waits this long for the job's first step, so that bad
# arguments (an unknown ref, a refused interpreter) are reported by the call itself.
BACKGROUND_START_S = 5.0


# ---------------------------------------------------------------------------- configuration for the runner


def config_to_json(config: ServerConfig) -> dict[str, Any]:
    def plain(value: Any) -> Any:
        if isinstance(value, Path):
            return str(value)
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value

    # A callable (the approval notifier) stays with the server: a job never shows a person anything,
    # the tool's finish step does that in the server process.
    return {
        f.name: plain(getattr(config, f.name))
        for f in dataclasses.fields(config)
        if not callable(getattr(config, f.name))
    }


def config_from_json(data: dict[str, Any]) -> ServerConfig:
    """Rebuild the server's configuration in the job process (paths back to Path)."""
    defaults = ServerConfig()
    values: dict[str, Any] = {}
    for f in dataclasses.fields(ServerConfig):
        if f.name not in data:
            continue
        value, example = data[f.name], getattr(defaults, f.name)
        path_typed = "Path" in str(f.type)
        if path_typed and isinstance(value, list):
            value = [Path(v) for v in value]
        elif path_typed and isinstance(value, str):
            value = Path(value)
        elif isinstance(example, tuple) and isinstance(value, list):
            value = tuple(value)
        values[f.name] = value
    return ServerConfig(**values)


def ref_of(obj: Any) -> str:
    return f"{obj.__module__}:{obj.__qualname__}"


def load_ref(ref: str) -> Any:
    import importlib

    module, _, qualname = ref.partition(":")
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


# ---------------------------------------------------------------------------- the waiting call


# One check-then-spawn at a time in this server, so two calls holding the same value cannot both start;
# across servers on one workspace, a lock file in the state folder does the same.
_SPAWN_LOCK = threading.Lock()


@contextlib.contextmanager
def _spawn_lock(state_dir: Path) -> Iterator[None]:
    """Hold the workspace's spawn lock (a file lock beside the state; threads only where there is none)."""
    with _SPAWN_LOCK:
        try:
            import fcntl
        except ImportError:  # Windows: the protocol's own lock still serialises the work itself
            yield
            return
        state_dir.mkdir(parents=True, exist_ok=True)
        with open(state_dir / "spawn.lock", "a+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


async def run_as_job(tool: RegisteredTool[Any, Any], args: BaseModel, call: ToolCall) -> CallToolResult:
    ctx = call.ctx
    assert tool.handler is not None
    holds = hold_key(tool.one_job_per, getattr(args, tool.one_job_per, None)) if tool.one_job_per else None
    params = {
        "tool": tool.name,
        "handler": ref_of(tool.handler),
        "input_model": ref_of(tool.input_model),
        "output_model": ref_of(tool.output_model),
        "finish": ref_of(tool.finish) if tool.finish is not None else None,
        "holds": holds,
        "args": args.model_dump(mode="json"),
        "outside_reads": call.outside_reads,
        "config": config_to_json(ctx.config),
    }
    mgr = await anyio.to_thread.run_sync(lambda: manager_for(ctx.store))
    argv = [*_runner_argv(), str(ctx.state_path)]

    def check_and_spawn() -> tuple[JobRecord | None, JobRecord | None]:
        if holds is None:
            return None, mgr.spawn(
                tool.name, argv, title=_title(tool.name, args), params=params, cwd=ctx.workspace
            )
        with _spawn_lock(ctx.state_path.parent):
            busy = running_jobs(ctx, holds)
            if busy:
                return busy[0], None
            title = _title(tool.name, args)
            return None, mgr.spawn(tool.name, argv, title=title, params=params, cwd=ctx.workspace)

    other, started = await anyio.to_thread.run_sync(check_and_spawn)
    if other is not None:
        assert holds is not None
        return error_result(
            f"{tool.name} is refused: {other.kind} for {holds.replace('=', ' ')} is still running as job "
            f"{other.id} ({step_text(other)}); one at a time",
            f"call get_job(job_id={other.id!r}, wait_s=40) for its result (repeat while it runs)",
        )
    assert started is not None
    rec = started
    wait_s = min(float(getattr(args, "wait_s", ctx.config.call_wait_s)), ctx.config.call_wait_s)
    background = bool(getattr(args, "background", False))
    if background:
        wait_s = min(wait_s, BACKGROUND_START_S)
    try:
        rec = await wait_for(mgr, rec.id, wait_s, call, until_started=background)
    except anyio.get_cancelled_exc_class():
        # The client gave up on this call (or went away): stop the job and clean up at once.
        mgr.request_cancel(rec.id)
        raise
    if rec.finished:
        done = rec
        rec = await anyio.to_thread.run_sync(lambda: finish_job(done, call))
        return job_result(rec, ctx.workspace_files, ctx.config, wrap=False)
    await anyio.to_thread.run_sync(lambda: mgr.set_waiter(rec.id, False))
    return pending_result(rec, waited=wait_s, background=background)


# ---------------------------------------------------------------------------- jobs that hold a value


def hold_key(field_name: str, value: Any) -> str | None:
    return f"{field_name}={value}" if value not in (None, "") else None


def running_jobs(ctx: ServerContext, holds: str, exclude: str | None = None) -> list[JobRecord]:
    """Jobs still running that hold `holds` (e.g. 'investigation_id=inv-1'); dead ones are recovered."""
    if not ctx.state_path.exists():
        return []
    mgr = manager_for(ctx.store)
    with ctx.store.connect() as conn:
        ids = [
            r["id"]
            for r in conn.execute(
                "SELECT id FROM jobs WHERE status = 'running' AND json_extract(params, '$.holds') = ? "
                "ORDER BY created_at",
                (holds,),
            )
        ]
    found = []
    for job_id in ids:
        if job_id == exclude:
            continue
        rec = mgr.refresh(job_id)
        if not rec.finished:
            found.append(rec)
    return found


def running_note(ctx: ServerContext, field_name: str, value: Any, exclude: str | None = None) -> str | None:
    """'wait for TOOL (job J): get_job(...)' while a job holds the value, else None. Never fails."""
    holds = hold_key(field_name, value)
    if holds is None:
        return None
    try:
        busy = running_jobs(ctx, holds, exclude)
    except Exception:
        log.debug("could not look for running jobs", exc_info=True)
        return None
    if not busy:
        return None
    rec = busy[0]
    return f"wait for {rec.kind} (still running as job {rec.id}): call get_job(job_id={rec.id!r}, wait_s=40)"


# ---------------------------------------------------------------------------- finishing in the server


FINISH_CLAIM_S = 10.0


def finish_job(rec: JobRecord, call: ToolCall) -> JobRecord:
    """Run the tool's finish step once, here (the server process delivering the result), and keep what
    it returns as the job's result, so every later get_job shows the same. Never loses the result."""
    ref = rec.params.get("finish")
    rendered = rec.rendered or {}
    if rec.status != SUCCEEDED or not ref or rendered.get("finished"):
        return rec
    mgr = manager_for(call.ctx.store)
    if not mgr.claim_finish(rec.id):  # another server delivers it right now: take its outcome
        deadline = time.monotonic() + FINISH_CLAIM_S
        while time.monotonic() < deadline:
            again = mgr.get(rec.id)
            if (again.rendered or {}).get("finished"):
                return again
            time.sleep(POLL_S)
        return mgr.get(rec.id)
    from trainsleuth.server.calls import ToolCall, render_output

    try:
        finish = load_ref(ref)
        output_model = load_ref(rec.params["output_model"])
        input_model = load_ref(rec.params["input_model"])
        out = output_model.model_validate(rec.result or {})
        args = input_model.model_validate(rec.params.get("args") or {})
        fcall = ToolCall(name=rec.kind, ctx=call.ctx, mcp_ctx=call.mcp_ctx)
        fcall.outside_reads = [(str(a), str(b)) for a, b in rec.params.get("outside_reads") or []]
        fcall.notes = list(rendered.get("notes") or [])
        out = finish(out, args, fcall)
        text = render_output(out, fcall)
        result = dict(out.model_dump(mode="json", by_alias=True))
    except Exception:
        log.exception("the finish step of job %s failed; its result is delivered as the job left it", rec.id)
        mgr.set_finished(rec.id, rec.result, rendered.get("text") or "")
        return mgr.get(rec.id)
    mgr.set_finished(rec.id, result, text)
    return mgr.get(rec.id)


def _runner_argv() -> list[str]:
    from trainsleuth.tools.jobs import runner_argv

    return runner_argv(RUNNER_MODULE)


def _title(tool: str, args: BaseModel) -> str:
    data = {k: v for k, v in args.model_dump(mode="json").items() if v not in (None, [], {}, "")}
    text = json.dumps(data, default=str)
    return f"{tool} {text[:200]}"


async def wait_for(
    mgr: JobManager, job_id: str, wait_s: float, call: ToolCall, *, until_started: bool = False
) -> JobRecord:
    """Wait for the job to finish (or `wait_s`), relaying each new progress step to the client."""
    deadline = time.monotonic() + max(0.0, wait_s)
    last_seq = 0
    while True:
        rec = await anyio.to_thread.run_sync(lambda: mgr.refresh(job_id))
        steps = await anyio.to_thread.run_sync(mgr.progress_since, job_id, last_seq)
        for seq, done, total, message in steps:  # every step, however fast they came
            last_seq = seq
            await call.aprogress(done, total, f"{message} (job {job_id})")
        if rec.finished or time.monotonic() >= deadline:
            return rec
        if until_started and last_seq > 0:
            return rec
        await anyio.sleep(POLL_S)


# ---------------------------------------------------------------------------- results of jobs


def job_fields(rec: JobRecord) -> dict[str, Any]:
    return {
        "job_id": rec.id,
        "kind": rec.kind,
        "status": rec.status,
        "progress_done": rec.progress_done,
        "progress_total": rec.progress_total,
        "progress_message": rec.progress_message,
        "created_at": rec.created_at,
        "finished_at": rec.finished_at,
    }


def job_result(rec: JobRecord, state_dir: Path, config: ServerConfig, *, wrap: bool) -> CallToolResult:
    """A finished job as a tool result: the tool's own result (wrap=False, for the call that
    started it) or the job's record with the result inside (wrap=True, for get_job)."""
    if rec.status != SUCCEEDED:
        return error_result(_failure_text(rec), rec.next_step or "start the job again")
    rendered = rec.rendered or {}
    result = rec.result or {}
    text = rendered.get("text") or json.dumps(result, indent=2)
    if wrap:
        structured: dict[str, Any] = {**job_fields(rec), "result": result}
        text = f"{rec.kind} job {rec.id}: succeeded\n{text}"
    else:
        structured = {**result, "job_id": rec.id, "status": rec.status}
    return build_result(
        rec.kind,
        structured,
        text,
        list(rendered.get("images") or []),
        state_dir=state_dir,
        max_text_chars=config.max_text_chars,
        max_structured_chars=config.max_structured_chars,
    )


def _failure_text(rec: JobRecord) -> str:
    what = {FAILED: "failed", CANCELLED: "was cancelled", INTERRUPTED: "was interrupted"}.get(
        rec.status, rec.status
    )
    detail = rec.error or ""
    if rec.status == FAILED and rec.params.get("tool"):
        return detail or f"{rec.kind} failed (job {rec.id})"
    return f"{rec.kind} {what} (job {rec.id}){': ' + detail if detail else ''}"


def pending_note(rec: JobRecord) -> str:
    return (
        f"call get_job(job_id={rec.id!r}, wait_s=40) for the result (repeat while it runs), "
        f"or cancel_job(job_id={rec.id!r}) to stop it"
    )


def step_text(rec: JobRecord) -> str:
    total = f" of about {rec.progress_total:g}" if rec.progress_total else ""
    return f"step {rec.progress_done:g}{total}: {rec.progress_message or 'starting'}"


def pending_result(rec: JobRecord, *, waited: float, background: bool) -> CallToolResult:
    from mcp_types import TextContent

    why = "started in the background" if background else f"still running after {waited:g} s"
    text = (
        f"{rec.kind} is {why} as job {rec.id} ({step_text(rec)}). It goes on without this call: "
        + pending_note(rec)
        + "."
    )
    structured = {**job_fields(rec), "next_step": pending_note(rec)}
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


__all__ = [
    "config_from_json",
    "config_to_json",
    "finish_job",
    "job_result",
    "pending_result",
    "run_as_job",
    "running_jobs",
    "running_note",
    "wait_for",
]

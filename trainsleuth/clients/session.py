"""The session one `trainsleuth client call|tools|describe` invocation talks to, and waiting on jobs.

- A default server (no `--server`, no `--url`) is the workspace's kept server (`clients/keep.py`), or a
  server of its own for the call when keeping is turned off or cannot work here (said once on stderr).
- `--url` talks to a streamable-HTTP server with the SDK's client, a connection per request.
- Waiting: a tool call waits at most ~40 s in the server, then hands back a running job; get_job waits
  at most 40 s per call. `follow` repeats get_job until the job finishes or the wait the caller asked
  for has passed, so `client call get_job --arg wait_s=300` (or `--wait 300` on any long tool) waits as
  long as asked; a long tool's own result is returned, as if it had finished within the call.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from trainsleuth.clients.scripted import ServerTarget, StepResult

Call = Callable[[str, dict[str, Any]], StepResult]
# The most one get_job call waits in the server (server/tools/bisect.py: MAX_WAIT_S).
GET_JOB_WAIT_S = 40.0


def _progress(done: float, total: float | None, message: str | None) -> None:
    of = f"/{total:g}" if total else ""
    print(f"  [{done:g}{of}] {message or ''}", file=sys.stderr, flush=True)


@contextmanager
def open_session(target: ServerTarget) -> Iterator[Call]:
    """`call(tool, arguments) -> StepResult` on the target's server, valid inside the `with`."""
    if target.url:
        yield _url_call(target)
        return
    from trainsleuth.clients.lite import LiteClient

    client = _kept_client(target)
    if client is None:
        client = LiteClient(target.command, target.cwd, os.environ)
        client.initialize()
    try:
        yield lambda tool, arguments: _lite_call(client, tool, arguments)
    finally:
        client.close()


def list_tools(target: ServerTarget) -> list[dict[str, Any]]:
    """tools/list as plain JSON: the small client (kept or own server), the SDK's over HTTP."""
    if target.url:
        import anyio

        from trainsleuth.clients.scripted import open_client

        async def main() -> list[Any]:
            async with open_client(target) as client:
                return list((await client.list_tools()).tools)

        return [dict(t.model_dump(mode="json", by_alias=True, exclude_none=True)) for t in anyio.run(main)]
    from trainsleuth.clients.lite import LiteClient

    client = _kept_client(target)
    if client is None:
        client = LiteClient(target.command, target.cwd, os.environ)
        client.initialize()
    try:
        return client.list_tools()
    finally:
        client.close()


def _kept_client(target: ServerTarget) -> Any:
    """A session on the workspace's kept server, or None (not wanted, or it cannot be used: said once)."""
    if not target.keep or target.cwd is None:
        return None
    from trainsleuth.clients import keep

    try:
        return keep.connect(target.command, target.cwd, os.environ)
    except keep.KeepError as exc:
        print(f"trainsleuth client: {exc}; this call starts a server of its own", file=sys.stderr)
        return None


def _lite_call(client: Any, tool: str, arguments: dict[str, Any]) -> StepResult:
    from trainsleuth.clients.lite import text_of

    result = client.call_tool(tool, arguments, _progress if sys.stderr.isatty() else None)
    return StepResult(
        tool, "tool", tool, bool(result.get("isError")), text_of(result.get("content", [])),
        result.get("structuredContent"),
    )  # fmt: skip


def _url_call(target: ServerTarget) -> Call:
    def call(tool: str, arguments: dict[str, Any]) -> StepResult:
        import anyio

        from trainsleuth.clients.scripted import call_tool, open_client

        async def main() -> StepResult:
            async with open_client(target) as client:
                return await call_tool(client, tool, arguments)

        return anyio.run(main)

    return call


def running_job(structured: Any) -> str | None:
    """The id of a job the result says is still running, else None."""
    if not isinstance(structured, Mapping):
        return None
    job_id = structured.get("job_id")
    return job_id if isinstance(job_id, str) and structured.get("status") in ("queued", "running") else None


def follow(
    call: Call, tool: str, arguments: Mapping[str, Any], result: StepResult, wait_s: float, started: float
) -> StepResult:
    """Repeat get_job while the job `result` names runs and `wait_s` (from `started`) has not passed.
    For a long tool the finished job's result is the tool's own; get_job answers as get_job."""
    job_id = running_job(result.structured)
    polls = 0
    while job_id is not None:
        left = wait_s - (time.monotonic() - started)
        if left < 0.5:
            break
        ask: dict[str, Any] = {"job_id": job_id, "wait_s": round(min(left, GET_JOB_WAIT_S), 1)}
        if arguments.get("investigation_id"):
            ask["investigation_id"] = arguments["investigation_id"]
        got = call("get_job", ask)
        polls += 1
        data = got.structured if isinstance(got.structured, Mapping) else {}
        if got.is_error or running_job(data) is None:
            if tool == "get_job" or got.is_error:
                return got
            final = dict(data.get("result") or {}) if data.get("status") == "succeeded" else dict(data)
            final.update({"job_id": job_id, "status": data.get("status")})
            return StepResult(tool, "tool", tool, data.get("status") != "succeeded", got.text, final)
        result = got
    if job_id is not None and polls:
        result.text += (
            f"\n(still running after {time.monotonic() - started:.0f} s of waiting, {polls + 1} calls)"
        )
    return result


__all__ = ["GET_JOB_WAIT_S", "Call", "follow", "list_tools", "open_session", "running_job"]

"""The process that runs one long tool call as a job: `python -m trainsleuth.server.jobrunner STATE JOB_ID`.

Started detached by `server/longrun.py` (its own session), it outlives the server and the client
that started it. It rebuilds the server's configuration and the tool's validated arguments from
the job's record, runs the handler with a `ToolCall` whose progress and cleanups go to the job,
records evidence when asked, and stores the result with its text rendering and images; its
exit ends the job. Cancellation (cancel_job, or the waiting call going away) reaches it through
the store.
"""

from __future__ import annotations

import base64
import logging
import sys
from pathlib import Path
from typing import Any

from trainsleuth.state.store import Store
from trainsleuth.tools.job_records import JobError
from trainsleuth.tools.jobs import JobHandle, run_spawned


def run_tool_job(handle: JobHandle, params: dict[str, Any]) -> dict[str, Any]:
    from trainsleuth.server.calls import ToolCall, expected_failure, record_evidence_for, render_output
    from trainsleuth.server.context import ServerContext
    from trainsleuth.server.longrun import config_from_json, load_ref

    ctx = ServerContext(config_from_json(params["config"]))
    handler = load_ref(params["handler"])
    input_model = load_ref(params["input_model"])
    args = input_model.model_validate(params["args"])
    call = ToolCall(name=params["tool"], ctx=ctx, mcp_ctx=None, cancel_event=handle.cancel_event, job=handle)
    call.outside_reads = [(str(x[0]), str(x[1])) for x in params.get("outside_reads", [])]
    call.progress_sink = lambda done, total, message: handle.progress(done, total, message)
    try:
        out = handler(args, call)
        record_evidence_for(out, args, call)
    except JobError:
        raise
    except Exception as exc:
        expected = expected_failure(exc, ctx)
        if expected is None or handle.cancelled:
            raise
        raise JobError(*expected) from None
    images = [base64.b64encode(png).decode() for png in call.images]
    handle.set_rendered(render_output(out, call), images, call.notes)
    return dict(out.model_dump(mode="json", by_alias=True))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m trainsleuth.server.jobrunner STATE_DB JOB_ID", file=sys.stderr)
        return 2
    handler = logging.StreamHandler(sys.stderr)  # the job's log file
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("trainsleuth")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    state, job_id = Path(argv[0]), argv[1]
    store = Store(state)

    def fn(handle: JobHandle) -> dict[str, Any]:
        rec = handle._manager.get(handle.id)
        return run_tool_job(handle, rec.params)

    status = run_spawned(store, job_id, fn)
    return 0 if status == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())

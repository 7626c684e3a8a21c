"""Bisect and job tools: bisect_commits, bisect_versions, get_job, cancel_job.

Both bisects are `long_running` tools: each runs as a job in a process of its own
(`server/longrun.py`); the call waits up to ~40 s with progress notifications, then hands back a
job id that `get_job(job_id, wait_s=...)` follows. `background: true` returns as soon as the
job has started. Temporary worktrees are registered with the job before they are created, so a
cancel, a failure or a crash removes them.
"""

from __future__ import annotations

import base64
import logging
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, PrivateAttr

from trainsleuth.server.registry import (
    AnalysisInput,
    AnalysisOutput,
    GitRef,
    ReadPath,
    ToolCall,
    ToolFailure,
    ToolInput,
    ToolRegistry,
    WorkspacePath,
)
from trainsleuth.tools.job_records import JobError, JobRecord
from trainsleuth.tools.jobs import manager_for

log = logging.getLogger("trainsleuth")

ISSUE = 7
MAX_WAIT_S = 40.0


class _BisectCommon(AnalysisInput):
    command: str = Field(description="Exit 0 good, 125 skip, 1-127 bad.")
    timeout_s: float | None = Field(default=600.0, ge=1)  # per test run
    on_timeout: Literal["skip", "bad"] = "skip"
    background: bool = False  # return as soon as the job has started


class BisectCommitsInput(_BisectCommon):
    repo: WorkspacePath
    good: GitRef
    bad: GitRef
    env: Literal["current", "uv"] = Field(default="current", description="uv: each commit's own uv.lock.")
    python: str | None = Field(default=None, description="With env=uv.")
    verify_endpoints: bool = True


class BisectVersionsInput(_BisectCommon):
    package: str
    versions: list[str] = Field(min_length=2, description="Oldest first.")
    python: str | None = None
    requirements: list[str] = Field(default_factory=list, description="Installed beside each version.")
    reuse_packages: list[str] = Field(default_factory=list, description="From python's env (torch...).")
    find_links: list[ReadPath] = Field(default_factory=list)
    index_url: str | None = None
    extra_index_urls: list[str] = Field(default_factory=list)
    no_index: bool = False
    cwd: WorkspacePath | None = None


class BisectOutput(AnalysisOutput):
    """A finished bisect: every field of the bisect's result (first bad commit or version, steps)."""

    model_config = ConfigDict(extra="allow")
    conclusion: str = ""

    def render_text(self) -> str:
        return render_bisect(self.model_dump(mode="json"))

    def evidence_summary(self) -> str:
        return self.conclusion[:300] or "bisect finished"


def render_bisect(res: dict[str, Any]) -> str:
    lines = [res.get("conclusion") or "bisect finished"]
    fb = res.get("first_bad_commit")
    if fb:
        ds = fb.get("diffstat", {})
        lines.append(
            f"first bad commit {fb['hash']}\n  author: {fb['author']}\n  date: {fb['date']}\n"
            f"  message: {fb['message'].splitlines()[0] if fb['message'] else ''}\n"
            f"  diffstat: {ds.get('files_changed', 0)} files, +{ds.get('insertions', 0)} "
            f"-{ds.get('deletions', 0)}"
        )
        for f in ds.get("files", [])[:20]:
            lines.append(f"    {f['path']} (+{f['insertions']} -{f['deletions']})")
    if res.get("runs") is not None:
        extra = ""
        if res.get("verification_runs"):
            extra = f" ({res['bisect_runs']} bisect + {res['verification_runs']} endpoint checks)"
        lines.append(f"test runs: {res['runs']}{extra}")
    if res.get("carried_files"):
        lines.append(
            f"untracked in your checkout, copied into each candidate: {', '.join(res['carried_files'])}"
        )
    if res.get("versions_tried"):
        lines.append(f"versions tried: {', '.join(res['versions_tried'])}")
    if res.get("reused_packages"):
        lines.append(f"reused from the base environment: {', '.join(res['reused_packages'])}")
    for failure in res.get("install_failures", []):
        lines.append(f"could not install {failure['version']} (skipped)")
    offer = res.get("trace_diff")
    if offer:
        call = ", ".join(f"{k}={v!r}" for k, v in offer["arguments"].items())
        lines.append(f"next: trace_diff({call}) {offer['why']}")
    steps = res.get("steps") or []
    if steps:
        lines.append("steps:")
        for s in steps:
            what = s.get("short") or s.get("version")
            code = "timeout" if s.get("timed_out") else f"exit {s.get('exit_code')}"
            kind = " [endpoint check]" if s.get("kind") == "verify" else ""
            note = f" - {s['note']}" if s.get("note") else ""
            lines.append(f"  {s['index']}. {what}: {s['verdict']} ({code}){kind}{note}")
    return "\n".join(lines)


def _reporter(call: ToolCall) -> Any:
    """The job handle (cleanups, cancellation), or a local stand-in when run outside a job."""
    if call.job is not None:
        return call.job
    from trainsleuth.tools.bisect.common import LocalReporter

    reporter = LocalReporter()
    reporter.cancel_event = call.cancel_event
    return reporter


def _env_cache(call: ToolCall) -> Path:
    from trainsleuth.state.location import ensure_workspace_dir

    # Environments are big caches of the workspace, kept in its git-ignored .trainsleuth/ (not the state).
    return ensure_workspace_dir(call.ctx.workspace) / "envs"


def bisect_commits(args: BisectCommitsInput, call: ToolCall) -> BisectOutput:
    from trainsleuth.tools.bisect.commits import prepare_commit_bisect, run_commit_bisect

    python = str(call.ctx.interpreter(args.python)) if args.python else None
    try:
        plan = prepare_commit_bisect(
            Path(args.repo),
            args.good,
            args.bad,
            args.command,
            env_mode=args.env,
            python=python,
            timeout_s=args.timeout_s,
            on_timeout=args.on_timeout,
            verify_endpoints=args.verify_endpoints,
            env_cache_dir=_env_cache(call),
        )
        result = run_commit_bisect(plan, _reporter(call))
    except JobError as exc:
        raise ToolFailure(exc.message, exc.next_step) from None
    return BisectOutput.model_validate(result)


def bisect_versions(args: BisectVersionsInput, call: ToolCall) -> BisectOutput:
    from trainsleuth.tools.bisect.versions import prepare_version_bisect, run_version_bisect

    python = call.ctx.interpreter(args.python)  # the workspace's interpreter policy (PolicyError if refused)
    try:
        plan = prepare_version_bisect(
            args.package,
            args.versions,
            args.command,
            cwd=Path(args.cwd) if args.cwd else call.ctx.workspace,
            cache_dir=_env_cache(call),
            python=str(python),
            requirements=args.requirements,
            find_links=args.find_links,
            index_url=args.index_url,
            extra_index_urls=args.extra_index_urls,
            no_index=args.no_index,
            timeout_s=args.timeout_s,
            on_timeout=args.on_timeout,
            reuse_packages=args.reuse_packages,
        )
        result = run_version_bisect(plan, _reporter(call))
    except JobError as exc:
        raise ToolFailure(exc.message, exc.next_step) from None
    return BisectOutput.model_validate(result)


class GetJobInput(AnalysisInput):
    job_id: str
    wait_s: float = Field(default=0.0, ge=0, description="Up to 40 per call.")


class JobInput(ToolInput):
    job_id: str


class JobOutput(AnalysisOutput):
    job_id: str
    kind: str
    status: Literal["running", "succeeded", "failed", "cancelled", "interrupted"]
    title: str = ""
    progress_done: float = 0
    progress_total: float | None = None
    progress_message: str | None = None
    current: str | None = None
    created_at: float
    finished_at: float | None = None
    error: str | None = None
    next_step: str | None = None
    note: str | None = None
    result: dict[str, Any] | None = None
    waited_s: float = 0.0
    # The finished tool's own text rendering (kept by the job), shown instead of the raw result.
    _text: str | None = PrivateAttr(default=None)

    @classmethod
    def from_record(cls, rec: JobRecord, note: str | None = None) -> JobOutput:
        out = cls(
            job_id=rec.id,
            kind=rec.kind,
            status=rec.status,
            title=rec.title,
            progress_done=rec.progress_done,
            progress_total=rec.progress_total,
            progress_message=rec.progress_message,
            current=rec.current,
            created_at=rec.created_at,
            finished_at=rec.finished_at,
            error=rec.error,
            next_step=rec.next_step,
            note=note,
            result=rec.result,
        )
        if rec.status == "succeeded" and rec.rendered:
            out._text = rec.rendered.get("text")
        return out

    def render_text(self) -> str:
        lines = [f"{self.kind} job {self.job_id}: {self.status}"]
        if self.status == "running":
            total = f" of about {self.progress_total:g}" if self.progress_total else ""
            lines[0] += f" (step {self.progress_done:g}{total}: {self.progress_message or 'starting'})"
        if self.error:
            lines.append(f"error: {self.error}")
        if self.next_step:
            lines.append(f"next step: {self.next_step}")
        if self.note:
            lines.append(self.note)
        if self.status == "succeeded":
            lines.append(self._text or render_bisect(self.result or {}))
        return "\n".join(lines)

    def evidence_summary(self) -> str:
        first = (self._text or "").splitlines()[:1]
        return (f"{self.kind} job {self.job_id}: {self.status}" + (f": {first[0]}" if first else ""))[:300]


def get_job(args: GetJobInput, call: ToolCall) -> JobOutput:
    """The job as it is, after waiting up to `wait_s`: at most the per-call limit (MAX_WAIT_S, or the server's
    lower call wait); a longer wait is cut to it, not refused, and the answer says so (`trainsleuth client
    call get_job` repeats the call to wait as long as asked)."""
    mgr = manager_for(call.ctx.store)
    # The server's call wait where it is lower (clients with short timeouts); 0 means "hand back jobs at
    # once", which still lets get_job wait.
    configured = call.ctx.config.call_wait_s
    limit = configured if 0 < configured < MAX_WAIT_S else MAX_WAIT_S
    wait_s = min(args.wait_s, limit)
    started = time.monotonic()
    try:
        rec = mgr.refresh(args.job_id)
        if wait_s > 0 and not rec.finished:
            rec = mgr.wait(
                args.job_id,
                wait_s,
                on_progress=lambda r: call.progress(r.progress_done, r.progress_total, r.progress_message),
                cancel_event=call.cancel_event,
            )
    except JobError as exc:
        raise ToolFailure(exc.message, exc.next_step) from None
    waited = round(time.monotonic() - started, 1)
    if rec.finished:
        from trainsleuth.server.longrun import finish_job

        rec = finish_job(rec, call)
        _keep_as_evidence(rec, args, call)
    note = None
    if not rec.finished:
        asked = (
            f" of the {args.wait_s:g} s asked (at most {limit:g} s per call)" if args.wait_s > wait_s else ""
        )
        note = (
            f"still running after waiting {waited:g} s{asked}; call get_job(job_id={rec.id!r}, wait_s=40) "
            "again, or cancel_job to stop it"
        )
    if rec.status == "succeeded" and rec.rendered:
        for png in rec.rendered.get("images") or []:
            call.add_image(base64.b64decode(png))
    out = JobOutput.from_record(rec, note=note)
    out.waited_s = waited
    out.evidence_id = (rec.result or {}).get("evidence_id") if rec.status == "succeeded" else None
    return out


def _keep_as_evidence(rec: JobRecord, args: GetJobInput, call: ToolCall) -> None:
    """A finished job's result is evidence once: the job recorded it when it knew the investigation; else,
    when get_job names one, it is recorded now (as the tool's own result) and the job remembers it.
    A status poll is never evidence."""
    result = rec.result
    if rec.status != "succeeded" or not args.investigation_id or not isinstance(result, dict):
        return
    if result.get("evidence_id"):
        return
    from trainsleuth.protocol.ledger import record_tool_evidence

    text = (rec.rendered or {}).get("text") or ""
    summary = (text.splitlines()[0] if text else f"{rec.kind} job {rec.id}: succeeded")[:300]
    result["evidence_id"] = record_tool_evidence(
        call.ctx.store, args.investigation_id, rec.kind, summary, result
    )
    manager_for(call.ctx.store).set_finished(rec.id, result, text)


def cancel_job(args: JobInput, call: ToolCall) -> JobOutput:
    mgr = manager_for(call.ctx.store)
    try:
        before = mgr.refresh(args.job_id)
        if before.finished:
            return JobOutput.from_record(before, note=f"the job had already finished ({before.status})")
        rec = mgr.cancel(args.job_id)
    except JobError as exc:
        raise ToolFailure(exc.message, exc.next_step) from None
    note = None
    if not rec.finished:
        note = "cancellation requested; the job is still stopping (its process polls for it)"
    return JobOutput.from_record(rec, note=note)


def recover_jobs(registry: ToolRegistry) -> None:
    """At start-up, mark jobs left running by a dead process as interrupted and clean up after them.

    Only when the workspace already has a state store: a server that never needs state never
    creates one.
    """
    ctx = registry.ctx
    try:
        if ctx.state_path.exists():
            manager_for(ctx.store)
    except Exception:
        log.warning("could not check for interrupted jobs", exc_info=True)


def register(registry: ToolRegistry) -> None:
    registry.add(
        "bisect_commits",
        bisect_commits,
        input_model=BisectCommitsInput,
        output_model=BisectOutput,
        description="An older commit worked: find the first bad one; checkout untouched.",
        title="Bisect commits",
        read_only=False,
        destructive=True,
        idempotent=False,
        open_world=True,
        long_running=True,
    )
    registry.add(
        "bisect_versions",
        bisect_versions,
        input_model=BisectVersionsInput,
        output_model=BisectOutput,
        description="A dependency upgrade broke it: find the first bad version.",
        title="Bisect versions",
        read_only=False,
        destructive=True,
        idempotent=False,
        open_world=True,
        long_running=True,
    )
    registry.add(
        "get_job",
        get_job,
        input_model=GetJobInput,
        output_model=JobOutput,
        description="A long tool's job: its status and result.",
        title="Get job",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
    )
    registry.add(
        "cancel_job",
        cancel_job,
        input_model=JobInput,
        output_model=JobOutput,
        description="Stop a job: its processes and worktrees go.",
        title="Cancel job",
        read_only=False,
        destructive=True,
        idempotent=True,
        open_world=False,
    )
    recover_jobs(registry)

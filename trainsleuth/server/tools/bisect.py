"""Bisect and job tools (issue 7): bisect_commits, bisect_versions, get_job, cancel_job.

Every bisect runs as a background job of this server (`trainsleuth.tools.jobs`). A call waits
for it up to `wait_s` seconds and reports progress on its own request while it waits; a job
still running after that (or at once with `background: true`) is followed with
`get_job(job_id, wait_s=...)`, which long-polls and reports progress on *its* request.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from trainsleuth.server.registry import (
    AnalysisInput,
    AnalysisOutput,
    GitRef,
    ToolCall,
    ToolFailure,
    ToolInput,
    ToolRegistry,
    WorkspacePath,
)
from trainsleuth.tools.jobs import FAILED, JobError, JobManager, JobRecord, manager_for

log = logging.getLogger("trainsleuth")

ISSUE = 7
MAX_WAIT_S = 3600.0


class _BisectCommon(AnalysisInput):
    command: str = Field(
        description="Reproducer run through /bin/sh in each candidate: exit 0 = good, 125 = skip, "
        "1..127 = bad (as `git bisect run`)."
    )
    timeout_s: float | None = Field(
        default=600.0, gt=0, description="Longest a single test run may take; then on_timeout applies."
    )
    on_timeout: Literal["skip", "bad"] = Field(
        default="skip", description="How a run that times out counts: 'skip' (untestable) or 'bad'."
    )
    background: bool = Field(
        default=False, description="Return the job id at once instead of waiting (then use get_job)."
    )
    wait_s: float = Field(
        default=120.0,
        ge=0,
        le=MAX_WAIT_S,
        description="Wait this long for the result (with progress notifications); if the job is still "
        "running after that, its job id is returned and it goes on in the background.",
    )


class BisectCommitsInput(_BisectCommon):
    repo: WorkspacePath = Field(description="Folder of the git repository (the command runs in it).")
    good: GitRef = Field(description="A commit (ref) on which the command passes; an ancestor of bad.")
    bad: GitRef = Field(description="A commit (ref) on which the command fails.")
    env: Literal["current", "uv"] = Field(
        default="current",
        description="'current': run in the server's environment; 'uv': build each candidate's own "
        "environment with `uv sync --frozen` from its uv.lock (cached by lockfile hash).",
    )
    python: str | None = Field(
        default=None,
        description="With env='uv': the interpreter uv builds the environments with (inside the workspace, "
        "the server's own, or allowed with --allow-python); default: the one uv picks for the project.",
    )
    verify_endpoints: bool = Field(
        default=True,
        description="When no candidate passed (or none failed), test good (or bad) once to rule out "
        "'good and bad both fail' (or 'bad passes').",
    )


class BisectVersionsInput(_BisectCommon):
    package: str = Field(description="The dependency to bisect, e.g. 'torch'.")
    versions: list[str] = Field(min_length=2, description="Candidate versions, oldest first.")
    python: str | None = Field(
        default=None,
        description="Interpreter the environments are built with (inside the workspace, the server's own, "
        "or allowed with --allow-python); default: the project's .venv python if present, else the server's.",
    )
    requirements: list[str] = Field(
        default_factory=list, description="Base requirements installed next to each version."
    )
    find_links: list[WorkspacePath] = Field(
        default_factory=list, description="Local folders of wheels (uv --find-links)."
    )
    index_url: str | None = Field(default=None, description="Package index URL (uv --index-url).")
    extra_index_urls: list[str] = Field(default_factory=list, description="Extra index URLs.")
    no_index: bool = Field(default=False, description="Use only find_links (uv --no-index).")
    cwd: WorkspacePath | None = Field(
        default=None, description="Folder the command runs in (default: workspace)."
    )


class GetJobInput(AnalysisInput):
    job_id: str = Field(description="The job id returned by bisect_commits or bisect_versions.")
    wait_s: float = Field(
        default=0.0,
        ge=0,
        le=600,
        description="Wait up to this long for the job to finish, reporting progress meanwhile.",
    )


class JobInput(ToolInput):
    job_id: str = Field(description="The job id returned by bisect_commits or bisect_versions.")


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

    @classmethod
    def from_record(cls, rec: JobRecord, note: str | None = None) -> JobOutput:
        return cls(
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

    def render_text(self) -> str:
        lines = [f"{self.kind} job {self.job_id}: {self.status}"]
        res = self.result or {}
        if self.status == "succeeded" and res.get("conclusion"):
            lines[0] += f": {res['conclusion']}"
        elif self.status == "running":
            total = f" of about {self.progress_total:g}" if self.progress_total else ""
            lines[0] += f" (step {self.progress_done:g}{total}: {self.progress_message or 'starting'})"
        if self.error:
            lines.append(f"error: {self.error}")
        if self.next_step:
            lines.append(f"next step: {self.next_step}")
        if self.note:
            lines.append(self.note)
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
        if res.get("versions_tried"):
            lines.append(f"versions tried: {', '.join(res['versions_tried'])}")
        for failure in res.get("install_failures", []):
            lines.append(f"could not install {failure['version']} (skipped)")
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

    def evidence_summary(self) -> str:
        return self.render_text().splitlines()[0][:300]


def _manager(call: ToolCall) -> JobManager:
    return manager_for(call.ctx.store)


def _env_cache(call: ToolCall) -> Path:
    from trainsleuth.protocol.location import ensure_workspace_dir

    # Environments are big caches of the workspace, kept in its git-ignored .trainsleuth/ (not the state).
    return ensure_workspace_dir(call.ctx.workspace) / "envs"


def _follow(mgr: JobManager, rec: JobRecord, background: bool, wait_s: float, call: ToolCall) -> JobOutput:
    if background:
        return JobOutput.from_record(
            rec, note=f"running in the background; follow it with get_job(job_id={rec.id!r}, wait_s=60)"
        )

    def report(r: JobRecord) -> None:
        # The job id rides along, so a client that stops waiting can still follow the job.
        call.progress(r.progress_done, r.progress_total, f"{r.progress_message} (job {r.id})")

    rec = mgr.wait(rec.id, wait_s, on_progress=report, cancel_event=call.cancel_event)
    if call.cancel_event.is_set() and not rec.finished:
        # The request that owned this job was cancelled: stop the job and clean up after it.
        rec = mgr.cancel(rec.id)
    if rec.status == FAILED:
        raise ToolFailure(f"{rec.kind} failed (job {rec.id}): {rec.error}", rec.next_step)
    note = None
    if not rec.finished:
        note = (
            f"still running after {wait_s:g} s; it goes on in the background: follow it with "
            f"get_job(job_id={rec.id!r}, wait_s=60), or stop it with cancel_job"
        )
    return JobOutput.from_record(rec, note=note)


def bisect_commits(args: BisectCommitsInput, call: ToolCall) -> JobOutput:
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
    except JobError as exc:
        raise ToolFailure(exc.message, exc.next_step) from None
    mgr = _manager(call)
    rec = mgr.submit(
        "bisect_commits",
        lambda handle: run_commit_bisect(plan, handle),
        title=f"bisect {args.good}..{args.bad} ({plan.candidates} candidates): {args.command}",
        params=plan.params(),
    )
    return _follow(mgr, rec, args.background, args.wait_s, call)


def bisect_versions(args: BisectVersionsInput, call: ToolCall) -> JobOutput:
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
        )
    except JobError as exc:
        raise ToolFailure(exc.message, exc.next_step) from None
    mgr = _manager(call)
    rec = mgr.submit(
        "bisect_versions",
        lambda handle: run_version_bisect(plan, handle),
        title=f"bisect {args.package} over {len(args.versions)} versions: {args.command}",
        params=plan.params(),
    )
    return _follow(mgr, rec, args.background, args.wait_s, call)


def get_job(args: GetJobInput, call: ToolCall) -> JobOutput:
    mgr = _manager(call)
    try:
        rec = mgr.get(args.job_id)
        if args.wait_s > 0 and not rec.finished:
            rec = mgr.wait(
                args.job_id,
                args.wait_s,
                on_progress=lambda r: call.progress(r.progress_done, r.progress_total, r.progress_message),
                cancel_event=call.cancel_event,
            )
    except JobError as exc:
        raise ToolFailure(exc.message, exc.next_step) from None
    note = None
    if not rec.finished:
        note = "still running; call get_job again with wait_s to wait for it, or cancel_job to stop it"
    return JobOutput.from_record(rec, note=note)


def cancel_job(args: JobInput, call: ToolCall) -> JobOutput:
    mgr = _manager(call)
    try:
        before = mgr.get(args.job_id)
        if before.finished:
            return JobOutput.from_record(before, note=f"the job had already finished ({before.status})")
        rec = mgr.cancel(args.job_id)
    except JobError as exc:
        raise ToolFailure(exc.message, exc.next_step) from None
    note = None
    if not rec.finished:
        note = "cancellation requested; the job is still stopping (its owner process polls for it)"
    return JobOutput.from_record(rec, note=note)


def recover_jobs(registry: ToolRegistry) -> None:
    """At start-up, mark jobs left running by a dead server as interrupted and clean up after them.

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
        output_model=JobOutput,
        description=(
            "Find the first bad commit between a good and a bad ref, like `git bisect run` (same "
            "midpoints, same number of runs) but with each candidate in its own temporary git worktree: "
            "your working tree, index, HEAD and stash are never touched. The command exits 0 for good, "
            "125 to skip, 1..127 for bad. env='uv' builds each candidate's environment from its own "
            "uv.lock. Runs as a job: waits up to wait_s with progress, else returns a job_id for get_job."
        ),
        title="Bisect commits",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=True,
    )
    registry.add(
        "bisect_versions",
        bisect_versions,
        input_model=BisectVersionsInput,
        output_model=JobOutput,
        description=(
            "Find the first bad version of a dependency: one cached uv virtual environment per "
            "candidate version (reused by later calls), binary search, the versions tried; a version "
            "that fails to install is skipped and reported. Runs as a job like bisect_commits."
        ),
        title="Bisect versions",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=True,
    )
    registry.add(
        "get_job",
        get_job,
        input_model=GetJobInput,
        output_model=JobOutput,
        description=(
            "Status, progress and result of a background job (bisects). With wait_s it waits for the "
            "job to finish, sending progress notifications meanwhile."
        ),
        title="Get job",
        read_only=True,
        destructive=False,
        idempotent=True,
        open_world=False,
    )
    registry.add(
        "cancel_job",
        cancel_job,
        input_model=JobInput,
        output_model=JobOutput,
        description=(
            "Cancel a running job: kills its test's whole process tree and removes its temporary "
            "worktrees and folders."
        ),
        title="Cancel job",
        read_only=False,
        destructive=True,
        idempotent=True,
        open_world=False,
    )
    recover_jobs(registry)

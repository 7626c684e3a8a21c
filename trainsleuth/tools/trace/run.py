"""Run the two variants under the tracer and compare them: the work behind `trace_diff`.

A variant is the user's command at a git revision (checked out in a temporary worktree, never in the
user's checkout), or a command of its own, with an interpreter of its own. The good variant (a) runs
twice, so its run-to-run noise is measured, and the other (b) once, each in a scratch copy of the
workspace (`tools/observe`), with `PYTHONHASHSEED` fixed and the tracer pinning every seed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainsleuth.tools.job_cleanup import _git, remove_worktree
from trainsleuth.tools.job_records import JobCancelled, JobError
from trainsleuth.tools.observe import (
    CommandError,
    ObservedRun,
    ObserveError,
    parse_command,
    require_training,
    run_observed,
)
from trainsleuth.tools.trace.models import TraceDiffReport, VariantInfo
from trainsleuth.tools.trace.report import build_report
from trainsleuth.tools.trace.traces import VariantTrace, load_traces

DEFAULT_STEPS = 5
MAX_STEPS = 50
TRACE_SEED = 1234


class TraceDiffError(JobError):
    """trace_diff cannot run or cannot compare; the message says why and what to give instead."""

    def __init__(self, message: str, next_step: str | None = None, detail: str | None = None) -> None:
        super().__init__(message, next_step)
        self.detail = detail


@dataclass
class Variant:
    label: str  # a | b
    command: str
    python: Path
    rev: str | None = None  # the commit (full hash) when the variant is a revision
    rev_ref: str | None = None
    tree: Path | None = None  # the worktree with that revision, once created


@dataclass
class TracePlan:
    workspace: Path  # what the observed runs copy (the repository's top level in rev mode)
    cwd: Path  # where the command runs, inside workspace
    a: Variant
    b: Variant
    steps: int = DEFAULT_STEPS
    timeout_s: float = 600.0
    start: int = 1  # the first training step traced (a later phase: after a teacher's own training)
    repo: Path | None = None
    carried: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def plan_trace_diff(
    *,
    workspace: Path,
    cwd: Path | None = None,
    command: str | None = None,
    rev_a: str | None = None,
    rev_b: str | None = None,
    command_a: str | None = None,
    command_b: str | None = None,
    python_a: Path,
    python_b: Path | None = None,
    steps: int = DEFAULT_STEPS,
    timeout_s: float = 600.0,
    start: int = 1,
) -> TracePlan:
    """Check the request before anything runs; TraceDiffError lists what is wrong."""
    problems: list[str] = []
    if command and (command_a or command_b):
        problems.append(
            "give either command (with rev_a/rev_b, or python and python_b) or command_a and command_b, not both"
        )
    if bool(command_a) != bool(command_b):
        problems.append("give both command_a and command_b (the good variant's command and the other's)")
    if bool(rev_a) != bool(rev_b):
        problems.append("give both rev_a and rev_b (the good revision and the other), or neither")
    if (rev_a or rev_b) and not command:
        problems.append("rev_a/rev_b need command: the training command to run at both revisions")
    if not command and not command_a and not command_b:
        problems.append(
            "give command (the training command you run) with rev_a and rev_b, or command_a and command_b"
        )
    if not 1 <= steps <= MAX_STEPS:
        problems.append(f"steps must be 1..{MAX_STEPS}")
    if start < 1:
        problems.append("start (the first step traced) must be 1 or more")
    if problems:
        raise TraceDiffError(
            "; ".join(problems), "e.g. trace_diff(command='python train.py', rev_a='v1.2', rev_b='HEAD')"
        )
    workspace = workspace.resolve()
    cwd = (cwd or workspace).resolve()
    pb = python_b or python_a
    for text in (command, command_a, command_b):
        if text:
            try:
                parse_command(text, python=python_a)
            except CommandError as exc:
                raise TraceDiffError(
                    str(exc), "give the command exactly as you type it, e.g. 'python train.py --steps 10'"
                ) from None
    if rev_a and rev_b and command:
        repo = _repo_top(cwd)
        if repo is None:
            raise TraceDiffError(
                f"{cwd} is not inside a git repository, so rev_a/rev_b cannot be checked out",
                "run in the repository's folder (cwd), or give command_a and command_b instead",
            )
        if repo != workspace and workspace not in repo.parents:
            raise TraceDiffError(
                f"the git repository's top folder {repo} is outside the workspace {workspace}",
                "open the repository's top folder as the workspace, or give command_a and command_b",
            )
        sha_a = _resolve(repo, rev_a, "rev_a")
        sha_b = _resolve(repo, rev_b, "rev_b")
        if sha_a == sha_b and pb == python_a:
            raise TraceDiffError(
                f"rev_a and rev_b are the same commit ({sha_a[:12]}) and the interpreter is the same: nothing would differ",
                "give two different revisions (for a bisect's result: the last good and the first bad commit)",
            )
        plan = TracePlan(
            start=start,
            workspace=repo,
            cwd=cwd,
            a=Variant("a", command, python_a, sha_a, rev_a),
            b=Variant("b", command, pb, sha_b, rev_b),
            steps=steps,
            timeout_s=timeout_s,
            repo=repo,
        )
        from trainsleuth.tools.bisect.commits import untracked_command_files

        subdir = "" if cwd == repo else os.path.relpath(cwd, repo)
        plan.carried = untracked_command_files(repo, subdir, command)
        return plan
    ca = command_a or command or ""
    cb = command_b or command or ""
    if ca.strip() == cb.strip() and pb == python_a:
        raise TraceDiffError(
            "the two variants are the same command with the same interpreter: nothing would differ",
            "give rev_a and rev_b (two commits), command_a and command_b, or python and python_b (two environments)",
        )
    return TracePlan(
        start=start,
        workspace=workspace,
        cwd=cwd,
        a=Variant("a", ca, python_a),
        b=Variant("b", cb, pb),
        steps=steps,
        timeout_s=timeout_s,
    )


def _repo_top(folder: Path) -> Path | None:
    proc = _git(str(folder), "rev-parse", "--show-toplevel")
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    return Path(proc.stdout.strip()).resolve()


def _resolve(repo: Path, ref: str, what: str) -> str:
    if ref.startswith("-") or "\0" in ref:
        raise TraceDiffError(f"{what} {ref!r} is not a revision", "pass a branch, tag or commit hash")
    proc = _git(str(repo), "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if proc.returncode != 0 or not proc.stdout.strip():
        raise TraceDiffError(
            f"{what} {ref!r} is not a commit in {repo}",
            "pass a branch, tag or commit hash that exists there (see `git log --oneline`)",
        )
    return proc.stdout.strip()


class Reporter:
    """What trace_diff needs from whoever runs it: a job handle, or a local stand-in."""

    def __init__(
        self, cancel_event: Any = None, progress: Callable[[float, float, str], None] | None = None
    ) -> None:
        import threading

        self.cancel_event = cancel_event or threading.Event()
        self._progress = progress
        self.cleanup: list[dict[str, str]] = []

    def progress(
        self, done: float, total: float | None = None, message: str | None = None, current: str | None = None
    ) -> None:
        if self._progress is not None:
            self._progress(done, total or 0, message or "")

    def add_cleanup(self, entry: dict[str, str]) -> None:
        self.cleanup.append(entry)

    def remove_cleanup(self, entry: dict[str, str]) -> None:
        if entry in self.cleanup:
            self.cleanup.remove(entry)


def run_trace_diff(plan: TracePlan, reporter: Any, env: dict[str, str] | None = None) -> TraceDiffReport:
    """Run a twice and b once under the tracer, and compare. Worktrees are removed whatever happens."""
    work: Path | None = None
    entries: list[dict[str, str]] = []
    try:
        if plan.a.rev or plan.b.rev:
            work = Path(tempfile.mkdtemp(prefix="trainsleuth-trace-"))
            dir_entry = {"kind": "dir", "path": str(work)}
            reporter.add_cleanup(dir_entry)
            entries.append(dir_entry)
            for v in (plan.a, plan.b):
                _checkout(plan, v, work, reporter, entries)
        run_env = dict(os.environ if env is None else env)
        run_env["PYTHONHASHSEED"] = "0"
        run_env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        order = [(plan.a, "a"), (plan.b, "b"), (plan.a, "a (again, for the noise)")]
        runs: list[ObservedRun] = []
        for i, (variant, title) in enumerate(order):
            if reporter.cancel_event.is_set():
                raise JobCancelled("cancelled")
            reporter.progress(
                i,
                len(order),
                f"running {title}: {variant.command}" + (f" at {variant.rev_ref}" if variant.rev_ref else ""),
            )
            runs.append(_run(plan, variant, run_env, reporter))
            # Fail fast: a that does not train, or b that never imports torch, cannot be compared.
            if i == 0:
                _check_a(runs[0])
            elif i == 1:
                _check_b(runs[1])
        reporter.progress(len(order), len(order), "comparing the traces")
        return compare_runs(plan, runs[0], runs[1], runs[2])
    finally:
        for entry in reversed(entries):
            if entry["kind"] == "worktree":
                remove_worktree(entry["repo"], entry["path"])
            else:
                shutil.rmtree(entry["path"], ignore_errors=True)
            reporter.remove_cleanup(entry)


def _checkout(plan: TracePlan, v: Variant, work: Path, reporter: Any, entries: list[dict[str, str]]) -> None:
    assert plan.repo is not None and v.rev is not None
    wt = work / f"{v.label}-{v.rev[:10]}-{uuid.uuid4().hex[:6]}"
    entry = {"kind": "worktree", "repo": str(plan.repo), "path": str(wt)}
    reporter.add_cleanup(entry)
    entries.append(entry)
    proc = _git(
        str(plan.repo),
        "-c",
        "core.hooksPath=/dev/null",
        "worktree",
        "add",
        "--detach",
        "--quiet",
        str(wt),
        v.rev,
    )
    if proc.returncode != 0:
        raise TraceDiffError(
            f"git could not check out {v.rev_ref} ({v.rev[:12]}) in a temporary worktree: {proc.stderr.strip()[:500]}",
            "check that the repository is healthy (`git fsck`) and that the temp folder is writable",
        )
    for rel in plan.carried:  # the user's untracked files the command names (a check script, a config)
        target = wt / rel
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(plan.repo / rel, target)
    v.tree = wt


def _run(plan: TracePlan, v: Variant, env: dict[str, str], reporter: Any) -> ObservedRun:
    def register(run_dir: Path) -> None:
        entry = {"kind": "dir", "path": str(run_dir)}
        reporter.add_cleanup(entry)

    try:
        return run_observed(
            v.command,
            python=v.python,
            workspace=plan.workspace,
            plugins=["trace"],
            steps=plan.steps,
            start=plan.start,
            options={"trace": {"seed": TRACE_SEED, "ops_steps": 1}},
            timeout_s=plan.timeout_s,
            cancel_event=reporter.cancel_event,
            env=env,
            cwd=plan.cwd,
            source=v.tree,
            on_start=register,
        )
    except CommandError as exc:
        raise TraceDiffError(f"variant {v.label}: {exc}", "give the command exactly as you type it") from None


def _info(plan: TracePlan, v: Variant, run: ObservedRun, trace: VariantTrace) -> VariantInfo:
    import json

    events = sum(len(p.events) for p in trace.procs)
    size = 0
    for rep in run.reports:
        section = (rep.get("plugins") or {}).get("trace")
        if section:
            size += len(json.dumps(section))
    steps = max(
        (len({e.get("k") for e in p.events if e.get("kind") == "param"}) for p in trace.procs), default=0
    )
    exc = next((r.get("exception") for r in run.reports if r.get("exception")), None)
    return VariantInfo(
        label=v.label,
        command=v.command,
        rev=(
            f"{v.rev_ref} ({v.rev[:12]})"
            if v.rev_ref and v.rev and not v.rev.startswith(v.rev_ref)
            else (v.rev[:12] if v.rev else None)
        ),
        python=str(v.python),
        processes=len(trace.procs),
        ranks=[p.rank for p in trace.procs],
        steps_observed=steps,
        events=events,
        trace_bytes=size,
        exit_code=run.process.returncode,
        ended=next((p.reason for p in trace.procs if p.reason), None),
        exception=f"{exc['type']}: {exc['message'][:200]}" if exc else None,
        workspace_changes=run.workspace_changes[:20],
    )


def _check_a(run_a: ObservedRun) -> VariantTrace:
    """a's traces; TraceDiffError when a did not train (nothing to compare with)."""
    try:
        require_training(run_a)
    except ObserveError as exc:
        raise TraceDiffError(
            f"the good variant (a) did not train: {exc.message}", exc.next_step, detail=exc.detail
        ) from None
    a = load_traces(run_a.reports, "a")
    if not a.procs:
        raise TraceDiffError(
            "the good variant (a) trained but no trace came back (the tracer could not start)",
            "look at the run's output below; report it if the tracer failed",
            detail="\n".join(str(r.get("plugin_errors")) for r in run_a.reports)[-3000:],
        )
    return a


def _check_b(run_b: ObservedRun) -> VariantTrace:
    """b's traces; TraceDiffError when no process of b imported torch (it failed before training)."""
    b = load_traces(run_b.reports, "b")
    if not b.procs:
        raise TraceDiffError(
            f"variant b produced no trace: it exited with code {run_b.process.returncode} before any Python process "
            "imported torch",
            "run b's command in a terminal: it fails before training starts (its output is below)",
            detail=run_b.process.output_tail(2500),
        )
    return b


def compare_runs(
    plan: TracePlan, run_a: ObservedRun, run_b: ObservedRun, run_a2: ObservedRun | None
) -> TraceDiffReport:
    """The report for three finished runs (a, b, a again): errors when a did not train or b never ran."""
    a = _check_a(run_a)
    b = _check_b(run_b)
    a2 = load_traces(run_a2.reports, "a") if run_a2 is not None else None
    notes = list(plan.notes)
    rank_map = {r: r for r in b.by_rank() if r in a.by_rank()}
    if not rank_map:
        rank_map = {b.procs[0].rank: a.procs[0].rank}
    if len(a.procs) != len(b.procs):
        notes.append(
            f"a ran {len(a.procs)} training process(es), b {len(b.procs)}: compared rank by rank where both have it"
            + (
                f" (a's rank {a.procs[0].rank} against b's rank {b.procs[0].rank})"
                if len(rank_map) == 1
                else ""
            )
        )
    for run, label in ((run_a, "a"), (run_b, "b")):
        for rep in run.reports:
            for name, err in (rep.get("plugin_errors") or {}).items():
                notes.append(f"{label}: the {name} plugin failed: {str(err).strip().splitlines()[-1][:300]}")
        if run.workspace_changes:
            notes.append(
                f"{label}: files in the workspace changed during the run (written by native code?): {', '.join(run.workspace_changes[:5])}"
            )
    for proc in b.procs:
        if proc.exception:
            notes.append(
                f"b raised {proc.exception.get('type')}: {str(proc.exception.get('message'))[:300]} (rank {proc.rank})"
            )
    dropped = {k: v for p in [*a.procs, *b.procs] for k, v in p.dropped.items()}
    if dropped:
        notes.append(
            "the trace reached its size bounds; left out: "
            + ", ".join(f"{v} {k} events" for k, v in dropped.items())
        )
    for p in a.procs[:1]:
        notes += [n for n in p.notes if "compile" in n]
    variants = [_info(plan, plan.a, run_a, a), _info(plan, plan.b, run_b, b)]
    return build_report(a, a2, b, variants, notes=notes, rank_map=rank_map)


__all__ = ["Reporter", "TraceDiffError", "TracePlan", "compare_runs", "plan_trace_diff", "run_trace_diff"]

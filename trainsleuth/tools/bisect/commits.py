"""Find the first bad commit without touching the user's checkout.

Every candidate is checked out with `git worktree add --detach` in a temporary folder of its
own (hooks disabled), tested there, and removed; the user's working tree, index, HEAD and stash
are never read for writing. The next candidate is chosen exactly as `git bisect` chooses it
(`select.py`), so the result and the number of test runs agree with `git bisect run`.

Two extra runs may happen, and are counted apart (`verification_runs`): when no candidate
passed, the good commit is tested to tell "the bug is right after good" from "good fails
too"; when no candidate failed, the bad commit is tested to tell "the bug is in bad itself"
from "bad passes". `git bisect run` trusts both endpoints blindly.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from trainsleuth.tools.bisect.common import (
    BisectError,
    OnTimeout,
    Reporter,
    RunOutcome,
    check_command,
    check_option_like,
    run_test,
    venv_environment,
    which_uv,
)
from trainsleuth.tools.bisect.select import choose_next, estimate_steps
from trainsleuth.tools.bisect.uvenv import sync_commit_env
from trainsleuth.tools.job_cleanup import _git, remove_worktree
from trainsleuth.tools.job_records import JobCancelled

EnvMode = Literal["current", "uv"]


@dataclass
class CommitBisectPlan:
    root: Path  # the repository's top level
    subdir: str  # where the command runs, relative to the top level ('' for the top)
    good: str
    bad: str
    good_ref: str
    bad_ref: str
    command: str
    env_mode: EnvMode = "current"
    python: str | None = None
    timeout_s: float | None = 600.0
    on_timeout: OnTimeout = "skip"
    verify_endpoints: bool = True
    candidates: int = 0
    env_cache_dir: Path | None = None
    env_timeout_s: float = 1800.0
    extra_env: dict[str, str] = field(default_factory=dict)
    carried: list[str] = field(default_factory=list)  # untracked files the command names, copied in

    def params(self) -> dict[str, Any]:
        return {
            "repo": str(self.root / self.subdir) if self.subdir else str(self.root),
            "good": self.good_ref,
            "bad": self.bad_ref,
            "command": self.command,
            "env": self.env_mode,
            "timeout_s": self.timeout_s,
            "on_timeout": self.on_timeout,
        }


def _git_out(root: Path | str, *args: str) -> str:
    proc = _git(str(root), *args)
    if proc.returncode != 0:
        raise BisectError(f"git {' '.join(args[:2])} failed: {proc.stderr.strip()[:500]}")
    return proc.stdout


def resolve_commit(root: Path, ref: str, what: str) -> str:
    check_option_like(ref, f"{what} ref")
    proc = _git(str(root), "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if proc.returncode != 0 or not proc.stdout.strip():
        raise BisectError(
            f"{what} ref {ref!r} is not a commit in {root}",
            "pass a branch, tag or commit hash that exists there (see `git log --oneline`)",
        )
    return proc.stdout.strip()


CARRY_MAX_BYTES = 1_000_000


def untracked_command_files(root: Path, subdir: str, command: str) -> list[str]:
    """Files the command names that the user's checkout has but git does not track (an untracked
    `check.sh`): paths relative to the repository's top level.

    `git bisect run` tests in the checkout itself, where such a reproducer is present at every
    commit; our candidates are clean worktrees, so each gets a copy of these files (read from the
    checkout, never written there). Only plain files inside the repository, up to 1 MB each."""
    try:
        words = shlex.split(command)
    except ValueError:
        return []
    base = root / subdir if subdir else root
    found: list[str] = []
    for word in words:
        if (
            not word
            or word.startswith("-")
            or os.path.isabs(word)
            or any(c in word for c in "$`*?[]{}~<>|;&=")
        ):
            continue
        path = base / word
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_size > CARRY_MAX_BYTES:
                continue
            rel = path.resolve().relative_to(root)
        except (OSError, ValueError):
            continue
        tracked = _git(str(root), "ls-files", "--error-unmatch", "--", str(rel))
        if tracked.returncode != 0 and str(rel) not in found and not str(rel).startswith(".git/"):
            found.append(str(rel))
    return found


def prepare_commit_bisect(
    repo: Path,
    good: str,
    bad: str,
    command: str,
    *,
    env_mode: EnvMode = "current",
    python: str | None = None,
    timeout_s: float | None = 600.0,
    on_timeout: OnTimeout = "skip",
    verify_endpoints: bool = True,
    env_cache_dir: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> CommitBisectPlan:
    """Check everything that can be checked before running anything; raise BisectError if wrong."""
    repo = Path(repo)
    if not repo.is_dir():
        raise BisectError(
            f"{repo} is not a folder", "pass the folder of a git repository inside the workspace"
        )
    top = _git(str(repo), "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise BisectError(
            f"{repo} is not inside a git repository",
            "pass the folder of a git repository inside the workspace",
        )
    root = Path(top.stdout.strip()).resolve()
    subdir = os.path.relpath(repo.resolve(), root)
    subdir = "" if subdir == "." else subdir
    if env_mode not in ("current", "uv"):
        raise BisectError(
            f"env must be 'current' or 'uv', not {env_mode!r}", "pass env='current' or env='uv'"
        )
    if on_timeout not in ("skip", "bad"):
        raise BisectError(f"on_timeout must be 'skip' or 'bad', not {on_timeout!r}")
    if timeout_s is not None and timeout_s <= 0:
        raise BisectError(
            "timeout_s must be positive", "pass the longest a single test run may take, in seconds"
        )
    good_hash = resolve_commit(root, good, "good")
    bad_hash = resolve_commit(root, bad, "bad")
    if good_hash == bad_hash:
        raise BisectError(
            f"good and bad are the same commit ({good_hash[:12]})", "pass two different commits"
        )
    anc = _git(str(root), "merge-base", "--is-ancestor", good_hash, bad_hash)
    if anc.returncode != 0:
        raise BisectError(
            f"good {good!r} ({good_hash[:12]}) is not an ancestor of bad {bad!r} ({bad_hash[:12]}), so "
            "there is no history from one to the other to bisect",
            "pass a good commit that the bad commit descends from (e.g. `git merge-base GOOD BAD`); "
            "if you are looking for the commit that fixed a bug, swap the two refs and make the command "
            "fail when the bug is absent",
        )
    base_env = {**os.environ, **(extra_env or {})}
    if env_mode == "current":
        check_command(command, env=base_env)
    elif not command.strip():
        check_command(command)
    if env_mode == "uv":
        lock_path = f"{subdir}/uv.lock" if subdir else "uv.lock"
        if _git(str(root), "cat-file", "-e", f"{bad_hash}:{lock_path}").returncode != 0:
            raise BisectError(
                f"env='uv' needs a uv.lock, and the bad commit has none at {lock_path}",
                "use env='current', or pass the folder of the uv project as repo",
            )
        which_uv()
    count = len(_git_out(root, "rev-list", bad_hash, f"^{good_hash}", "--").split())
    return CommitBisectPlan(
        root=root,
        subdir=subdir,
        good=good_hash,
        bad=bad_hash,
        good_ref=good,
        bad_ref=bad,
        command=command,
        env_mode=env_mode,
        python=python,
        timeout_s=timeout_s,
        on_timeout=on_timeout,
        verify_endpoints=verify_endpoints,
        candidates=count,
        env_cache_dir=env_cache_dir,
        extra_env=dict(extra_env or {}),
        carried=untracked_command_files(root, subdir, command),
    )


def candidate_graph(root: Path, bad: str, goods: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Candidates (bad included, newest first, in git's order) and their parents."""
    out = _git_out(root, "rev-list", "--parents", bad, *[f"^{g}" for g in goods], "--")
    order: list[str] = []
    parents: dict[str, list[str]] = {}
    for line in out.splitlines():
        parts = line.split()
        if parts:
            order.append(parts[0])
            parents[parts[0]] = parts[1:]
    return order, parents


def commit_info(root: Path, sha: str) -> dict[str, Any]:
    """Hash, author, date, message and diffstat of a commit (against its first parent), from git itself."""
    head = _git_out(root, "show", "-s", "--format=%H%x00%an%x00%ae%x00%aI%x00%B", "--end-of-options", sha)
    full, name, email, date, message = (head.split("\x00", 4) + [""] * 5)[:5]
    parents = _git_out(root, "rev-list", "--parents", "-n", "1", "--end-of-options", sha).split()[1:]
    if parents:
        numstat = _git_out(root, "diff", "--numstat", "-M", parents[0], full)
    else:
        numstat = _git_out(root, "show", "--numstat", "-M", "--format=", "--root", "--end-of-options", full)
    files: list[dict[str, Any]] = []
    for line in numstat.splitlines():
        parts = line.split("\t", 2)
        if len(parts) != 3:
            continue
        added, deleted, path = parts
        files.append(
            {
                "path": path,
                "insertions": int(added) if added.isdigit() else 0,  # '-' for binary files
                "deletions": int(deleted) if deleted.isdigit() else 0,
            }
        )
    return {
        "hash": full.strip(),
        "short": full.strip()[:12],
        "author": f"{name} <{email}>",
        "date": date.strip(),
        "message": message.strip(),
        "diffstat": {
            "files_changed": len(files),
            "insertions": sum(f["insertions"] for f in files),
            "deletions": sum(f["deletions"] for f in files),
            "files": files[:100],
        },
    }


class _Runner:
    """Runs the test on one commit in a worktree of its own, then removes the worktree."""

    def __init__(self, plan: CommitBisectPlan, reporter: Reporter) -> None:
        self.plan = plan
        self.reporter = reporter
        self.token = uuid.uuid4().hex[:8]
        self.work = Path(tempfile.mkdtemp(prefix=f"trainsleuth-bisect-{self.token}-"))
        self.dir_entry = {"kind": "dir", "path": str(self.work)}
        reporter.add_cleanup(self.dir_entry)
        self.base_env = {**os.environ, **plan.extra_env}
        self.uv = which_uv() if plan.env_mode == "uv" else None
        cache = plan.env_cache_dir or Path(tempfile.gettempdir()) / "trainsleuth-envs"
        self.env_cache = cache
        self.count = 0

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        self.reporter.remove_cleanup(self.dir_entry)

    def test(self, sha: str) -> tuple[RunOutcome, dict[str, Any]]:
        self.count += 1
        wt = self.work / f"ts-bisect-{self.token}-{self.count:03d}-{sha[:10]}"
        entry = {"kind": "worktree", "repo": str(self.plan.root), "path": str(wt)}
        self.reporter.add_cleanup(entry)
        extra: dict[str, Any] = {}
        try:
            proc = _git(
                str(self.plan.root),
                "-c",
                "core.hooksPath=/dev/null",
                "worktree",
                "add",
                "--detach",
                "--quiet",
                str(wt),
                sha,
            )
            if proc.returncode != 0:
                raise BisectError(
                    f"git could not check out {sha[:12]} in a temporary worktree: {proc.stderr.strip()[:500]}",
                    "check that the repository is healthy (`git fsck`) and that the temp folder is writable",
                )
            for rel in self.plan.carried:  # the user's untracked reproducer, as `git bisect run` sees it
                target = wt / rel
                if not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(self.plan.root / rel, target)
            cwd = wt / self.plan.subdir if self.plan.subdir else wt
            env: dict[str, str] = dict(self.base_env)
            if self.plan.env_mode == "uv":
                assert self.uv is not None
                started = time.monotonic()
                built = sync_commit_env(
                    uv=self.uv,
                    project_dir=cwd,
                    cache_dir=self.env_cache,
                    python=self.plan.python,
                    base_env=self.base_env,
                    timeout_s=self.plan.env_timeout_s,
                    cancel_event=self.reporter.cancel_event,
                )
                extra["env"] = {
                    "key": built.key,
                    "reused": built.reused,
                    "ok": built.ok,
                    "build_s": round(time.monotonic() - started, 3),
                }
                if not built.ok or built.path is None:
                    return (
                        RunOutcome(
                            "skip",
                            None,
                            False,
                            0.0,
                            built.log_tail,
                            "environment could not be built: skipped",
                        ),
                        extra,
                    )
                env = venv_environment(env, built.path)
            outcome = run_test(
                self.plan.command,
                cwd=cwd if cwd.is_dir() else wt,
                env=env,
                timeout_s=self.plan.timeout_s,
                on_timeout=self.plan.on_timeout,
                cancel_event=self.reporter.cancel_event,
            )
            return outcome, extra
        finally:
            remove_worktree(str(self.plan.root), str(wt))
            self.reporter.remove_cleanup(entry)


def run_commit_bisect(plan: CommitBisectPlan, reporter: Reporter) -> dict[str, Any]:
    """Bisect `plan` to the first bad commit; returns the result as plain JSON data."""
    root = plan.root
    runner = _Runner(plan, reporter)
    steps: list[dict[str, Any]] = []
    goods = [plan.good]
    bad = plan.bad
    skipped: set[str] = set()
    verified: dict[str, RunOutcome] = {}
    verification_runs = 0

    def record(kind: str, sha: str, outcome: RunOutcome, extra: dict[str, Any]) -> None:
        steps.append(
            {
                "index": len(steps) + 1,
                "kind": kind,
                "commit": sha,
                "short": sha[:12],
                **outcome.to_dict(),
                **extra,
            }
        )

    def verify(sha: str) -> RunOutcome:
        nonlocal verification_runs
        if sha not in verified:
            reporter.progress(len(steps), len(steps) + 1, f"checking endpoint {sha[:12]}", sha)
            outcome, extra = runner.test(sha)
            verification_runs += 1
            record("verify", sha, outcome, extra)
            verified[sha] = outcome
        return verified[sha]

    first_bad: str | None = None
    ambiguous: list[str] = []
    try:
        while True:
            if reporter.cancel_event.is_set():
                raise JobCancelled("cancelled")
            order, parents = candidate_graph(root, bad, goods)
            choice = choose_next(order, parents, bad, skipped)
            if choice.found:
                first_bad = choice.commit
                break
            if choice.only_skipped_left:
                ambiguous = choice.only_skipped_left
                break
            if choice.commit is None:
                raise BisectError("no testable commit is left between good and bad")
            sha = choice.commit
            bisect_steps = sum(1 for s in steps if s["kind"] == "bisect")
            total = bisect_steps + 1 + estimate_steps(choice.remaining)
            reporter.progress(
                bisect_steps,
                total,
                f"step {bisect_steps + 1} of about {total}: testing {sha[:12]} ({choice.remaining} candidates left)",
                sha,
            )
            outcome, extra = runner.test(sha)
            if outcome.exit_code in (126, 127) and plan.good not in verified:
                # As git does: a command that cannot run everywhere is not a bisect result.
                good_outcome = verify(plan.good)
                if good_outcome.exit_code in (126, 127):
                    raise BisectError(
                        f"the test command could not be run (exit {outcome.exit_code}: "
                        f"{'command not found' if outcome.exit_code == 127 else 'not executable'}), "
                        f"on the good commit too. Output tail:\n{outcome.output_tail}",
                        "check the command (the program and any script path, relative to the repository)",
                    )
            record("bisect", sha, outcome, extra)
            if outcome.verdict == "good":
                goods.append(sha)
            elif outcome.verdict == "bad":
                bad = sha
            else:
                skipped.add(sha)
        verdicts = [s["verdict"] for s in steps if s["kind"] == "bisect"]
        if plan.verify_endpoints and first_bad is not None:
            if "good" not in verdicts:
                g = verify(plan.good)
                if g.verdict == "bad":
                    raise BisectError(
                        f"the good commit {plan.good[:12]} fails too (exit {g.exit_code}"
                        f"{', timed out' if g.timed_out else ''}): good and bad both fail, so there is no "
                        f"first bad commit between them. Output tail:\n{g.output_tail}",
                        "pass an older good commit on which the command passes, or fix the command",
                    )
            if "bad" not in verdicts:
                b = verify(plan.bad)
                if b.verdict == "good":
                    raise BisectError(
                        f"the bad commit {plan.bad[:12]} passes (exit 0): the command does not reproduce "
                        "the problem there, so there is nothing to bisect",
                        "check the command reproduces the failure on the bad commit, or pass another bad ref",
                    )
    finally:
        runner.close()
    bisect_runs = sum(1 for s in steps if s["kind"] == "bisect")
    result: dict[str, Any] = {
        "repo": str(root / plan.subdir) if plan.subdir else str(root),
        "good": plan.good,
        "bad": plan.bad,
        "command": plan.command,
        "env": plan.env_mode,
        "candidates": plan.candidates,
        "first_bad_commit": commit_info(root, first_bad) if first_bad else None,
        "possible_first_bad": ambiguous,
        "runs": bisect_runs + verification_runs,
        "bisect_runs": bisect_runs,
        "verification_runs": verification_runs,
        "skipped": sorted(skipped),
        "steps": steps,
        "carried_files": list(plan.carried),
    }
    if first_bad:
        from trainsleuth.tools.trace.offer import commit_offer

        offer = commit_offer(root / plan.subdir if plan.subdir else root, first_bad, plan.command)
        if offer is not None:
            result["trace_diff"] = offer
        info = result["first_bad_commit"]
        subject = info["message"].splitlines()[0] if info["message"] else ""
        result["conclusion"] = (
            f"first bad commit: {info['short']} {subject!r} by {info['author']} "
            f"({bisect_runs} bisect runs over {plan.candidates} candidates)"
        )
    else:
        result["conclusion"] = (
            f"only skipped commits are left: the first bad commit is one of {len(ambiguous)} "
            f"({', '.join(c[:12] for c in ambiguous)})"
        )
    reporter.progress(bisect_runs, bisect_runs, "done", first_bad)
    return result

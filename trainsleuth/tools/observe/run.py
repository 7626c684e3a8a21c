"""Run the user's own command with the observer inside every Python process it starts.

Server side of `runners/_ts_observe.py`: build the scratch copy (`mirror.py`), write the observer's
configuration, put `runners/observer_site` first on PYTHONPATH (its `sitecustomize` starts the
observer), run the command under `process.run_process` (timeout, memory ceiling, cancellation,
whole-tree kill), and read back one report per observed process. The user's files are left as found:
outputs land in the copy, and anything that changed in the workspace anyway is listed.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainsleuth.process import ProcessResult, run_process
from trainsleuth.tools.observe.command import CommandError, ObservedCommand, parse_command
from trainsleuth.tools.observe.mirror import Mirror, changes, make_mirror, remove_old_runs, snapshot
from trainsleuth.tools.runners.launch import RUNNERS_DIR

SITE_DIR = RUNNERS_DIR / "observer_site"
RUNS_KEPT = 5
REPORT_PREFIX = "proc-"  # as runners/_ts_observe.py writes them
PROGRESS_PREFIX = "progress-"


class ObserveError(Exception):
    """The observed run produced nothing to judge; `kind` is machine-readable, `next_step` says what to do."""

    def __init__(self, kind: str, message: str, next_step: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.next_step = next_step
        self.detail = detail


@dataclass
class ObservedRun:
    command: ObservedCommand
    interpreter: Path
    run_dir: Path
    mirror: Mirror
    process: ProcessResult
    reports: list[dict[str, Any]]  # one per Python process that imported torch, rank order
    workspace_changes: list[str] = field(default_factory=list)

    @property
    def trained(self) -> list[dict[str, Any]]:
        """Reports of the processes that stepped an optimizer (the training ranks)."""
        return [r for r in self.reports if any(o.get("steps") for o in r.get("optimizers", []))]

    @property
    def stopped_by_observer(self) -> bool:
        return any(r.get("reason") == "steps_done" for r in self.reports)


def run_observed(
    command: str | list[str],
    *,
    python: Path,
    workspace: Path,
    plugins: list[str],
    steps: int = 8,
    start: int = 1,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    stop: bool = True,
    timeout_s: float = 600.0,
    memory_limit_mb: float | None = None,
    cancel_event: threading.Event | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    on_start: Callable[[Path], None] | None = None,
    source: Path | None = None,
) -> ObservedRun:
    """Run `command` in a scratch copy of `workspace`, observing iterations start..start+steps-1.

    Raises CommandError for a command that cannot run, ObserveError when the observer saw nothing
    (the program failed before training, or never imported torch). `on_start(run_dir)` is called
    before the command starts (a job registers the folder for clean-up there). `source`: run the
    files of this git worktree (another revision) instead of the workspace's own (`make_mirror`).
    """
    workspace = workspace.resolve()
    parsed = parse_command(command, python=python)
    runs = workspace / ".trainsleuth" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    remove_old_runs(runs, RUNS_KEPT - 1)
    run_dir = runs / f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    out_dir = run_dir / "out"
    out_dir.mkdir(parents=True)
    if on_start is not None:
        on_start(run_dir)
    mirror = make_mirror(workspace, run_dir, source=source)
    argv = [_to_mirror(a, mirror) for a in parsed.argv]
    config = {
        "out_dir": str(out_dir),
        "plugins": list(plugins),
        "options": {k: dict(v) for k, v in (options or {}).items()},
        "start": start,
        "steps": steps,
        "stop": stop,
        "guard": {"mirror": str(mirror.tree), "workspace": str(workspace), "exempt": [str(out_dir)]},
    }
    config_path = run_dir / "observe.json"
    config_path.write_text(json.dumps(config), encoding="utf-8")
    run_env = _environment(env, python, config_path)
    run_cwd = mirror.to_mirror(cwd) if cwd is not None else mirror.tree
    before = snapshot(workspace)
    try:
        result = run_process(
            argv,
            cwd=run_cwd,
            env=run_env,
            timeout_s=timeout_s,
            memory_limit_mb=memory_limit_mb,
            cancel_event=cancel_event,
        )
    except (FileNotFoundError, PermissionError) as exc:
        raise CommandError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    after = snapshot(workspace)
    reports = read_reports(out_dir)
    return ObservedRun(
        command=parsed,
        interpreter=python,
        run_dir=run_dir,
        mirror=mirror,
        process=result,
        reports=reports,
        workspace_changes=[c for c in changes(before, after) if not c[1:].startswith(".trainsleuth")],
    )


def _to_mirror(arg: str, mirror: Mirror) -> str:
    """An absolute path into the workspace, in an argument, points into the copy instead."""
    ws = str(mirror.workspace)
    if arg.startswith(os.path.join(ws, ".trainsleuth") + os.sep):
        return arg  # trainsleuth's own folder (a bisect's environments) is not copied: use it where it is
    if ws in arg:
        return arg.replace(ws + os.sep, str(mirror.tree) + os.sep).replace(ws + " ", str(mirror.tree) + " ")
    return arg


def _environment(env: Mapping[str, str] | None, python: Path, config_path: Path) -> dict[str, str]:
    run_env = dict(os.environ if env is None else env)
    user_path = run_env.get("PYTHONPATH", "")
    run_env["PYTHONPATH"] = str(SITE_DIR) + (os.pathsep + user_path if user_path else "")
    run_env["TRAINSLEUTH_OBSERVE"] = str(config_path)
    run_env["PATH"] = str(python.parent) + os.pathsep + run_env.get("PATH", "")
    run_env.setdefault("PYTHONUNBUFFERED", "1")
    return run_env


def require_training(run: ObservedRun) -> list[dict[str, Any]]:
    """The training processes' reports, or ObserveError saying plainly why there is nothing to judge."""
    trained = run.trained
    if trained:
        return trained
    tail = run.process.output_tail(3000)
    proc = run.process
    if proc.timed_out:
        raise ObserveError(
            "timeout",
            f"the command ran {proc.duration_s:.0f} s without finishing an optimizer step",
            "raise timeout_s, or check that the command starts training quickly (a small config)",
            tail,
        )
    if proc.cancelled:
        raise ObserveError("cancelled", "the run was cancelled", "call again when ready", tail)
    if proc.memory_exceeded:
        raise ObserveError(
            "out_of_memory",
            f"the command went over the memory limit ({proc.peak_rss_mb or 0:.0f} MB)",
            "raise memory_limit_mb or run a smaller configuration",
            tail,
        )
    if not run.reports:
        if proc.returncode not in (0, None):
            raise ObserveError(
                "command_failed",
                f"the command exited with code {proc.returncode} before any Python process imported torch",
                "run the same command in a terminal: it fails before training starts",
                tail,
            )
        raise ObserveError(
            "not_observed",
            "no Python process of the command imported torch under the observer (python -I/-E, a "
            "script that resets PYTHONPATH, or a command that is not the training run)",
            "give the command that starts training, e.g. 'python train.py ...' or 'torchrun ... train.py'",
            tail,
        )
    failed = [r for r in run.reports if r.get("exception")]
    if failed:
        exc = failed[0]["exception"]
        raise ObserveError(
            "raised_before_training",
            f"the command raised {exc['type']}: {exc['message'][:300]} before its first optimizer step",
            "fix the error (the traceback is below) or give a configuration that reaches training",
            exc.get("traceback", tail),
        )
    built = sum(len(r.get("optimizers", [])) for r in run.reports)
    raise ObserveError(
        "no_training_step",
        f"the command ran (exit code {proc.returncode}) but no optimizer ever stepped"
        + (f"; {built} optimizer(s) were built" if built else "; no optimizer was built"),
        "give the command that trains (not evaluation or preprocessing), with at least one optimizer step",
        tail,
    )


def read_reports(out_dir: Path) -> list[dict[str, Any]]:
    """Every process report the observer wrote, ordered by node and rank; unreadable ones are skipped."""
    reports = []
    for path in sorted(out_dir.glob(f"{REPORT_PREFIX}*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            data["_file"] = path.name
            reports.append(data)
    reports.sort(
        key=lambda r: (r["identity"].get("node", 0), r["identity"].get("rank", 0), r["identity"]["pid"])
    )
    return reports


def read_progress(out_dir: Path) -> list[dict[str, Any]]:
    """The last iteration each process finished, with its time (for hang detection while it runs)."""
    out = []
    for path in sorted(out_dir.glob(f"{PROGRESS_PREFIX}*.json")):
        try:
            out.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return out


__all__ = [
    "CommandError",
    "ObserveError",
    "ObservedRun",
    "read_progress",
    "read_reports",
    "require_training",
    "run_observed",
]

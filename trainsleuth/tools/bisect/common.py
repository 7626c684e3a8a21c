"""What both bisects share: errors, the reporter a bisect talks to, running the test command
and reading its verdict the way `git bisect run` does."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from trainsleuth.process import ProcessResult, run_process, tail_text
from trainsleuth.tools.job_records import JobCancelled, JobError

OnTimeout = Literal["skip", "bad"]
Verdict = Literal["good", "bad", "skip"]

STEP_TAIL_CHARS = 1500
SKIP_EXIT = 125


class BisectError(JobError):
    """A bisect cannot start or cannot go on; the message says why and what to do next."""


class Reporter(Protocol):
    """What a bisect needs from whoever runs it (a `JobHandle`, or `LocalReporter`)."""

    cancel_event: threading.Event

    def progress(
        self, done: float, total: float | None = None, message: str | None = None, current: str | None = None
    ) -> None: ...

    def add_cleanup(self, entry: dict[str, str]) -> None: ...

    def remove_cleanup(self, entry: dict[str, str]) -> None: ...


class LocalReporter:
    """A reporter for running a bisect directly (library use, benchmarks): no job, no store."""

    def __init__(self) -> None:
        self.cancel_event = threading.Event()
        self.events: list[tuple[float, float | None, str | None, str | None]] = []
        self.cleanup: list[dict[str, str]] = []

    def progress(
        self, done: float, total: float | None = None, message: str | None = None, current: str | None = None
    ) -> None:
        self.events.append((done, total, message, current))

    def add_cleanup(self, entry: dict[str, str]) -> None:
        self.cleanup.append(entry)

    def remove_cleanup(self, entry: dict[str, str]) -> None:
        if entry in self.cleanup:
            self.cleanup.remove(entry)


@dataclass
class RunOutcome:
    verdict: Verdict
    exit_code: int | None
    timed_out: bool
    duration_s: float
    output_tail: str
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "duration_s": round(self.duration_s, 3),
            "output_tail": self.output_tail,
            "note": self.note,
        }


def check_option_like(value: str, what: str) -> None:
    if value.startswith("-"):
        raise BisectError(
            f"{what} {value!r} begins with '-', which would be read as an option; refused",
            f"pass the {what} without a leading '-'",
        )
    if "\x00" in value:
        raise BisectError(f"{what} contains a null byte", f"pass a plain {what}")


def check_command(command: str, *, env: Mapping[str, str] | None = None) -> None:
    """Refuse an empty command, or one whose program is plainly not installed."""
    if not command.strip():
        raise BisectError("the test command is empty", "pass the reproducer, e.g. 'python repro.py'")
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise BisectError(f"the test command cannot be parsed: {exc}", "check its quoting") from None
    if not words:
        raise BisectError("the test command is empty", "pass the reproducer, e.g. 'python repro.py'")
    first = words[0]
    # Paths (checked per candidate, they may only exist in some commits), assignments and shell syntax.
    if "/" in first or "=" in first or any(ch in first for ch in "$`(){}<>|;&!*?[]~"):
        return
    probe = subprocess.run(
        ["/bin/sh", "-c", 'command -v -- "$1" >/dev/null 2>&1', "sh", first],
        env=dict(env) if env is not None else None,
        capture_output=True,
        timeout=30,
        check=False,
    )
    if probe.returncode != 0:
        raise BisectError(
            f"the test command's program {first!r} was not found on PATH",
            "pass a command that exists (e.g. 'python repro.py', or a path to a script), "
            "or use env='uv' if the program is installed by the project's lockfile",
        )


def venv_environment(base: Mapping[str, str], venv: Path) -> dict[str, str]:
    """`base` with the virtual environment activated (its bin first on PATH)."""
    env = dict(base)
    env.pop("PYTHONHOME", None)
    env["VIRTUAL_ENV"] = str(venv)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    env["PATH"] = os.pathsep.join([str(bindir), env.get("PATH", os.defpath)])
    return env


def run_test(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float | None,
    on_timeout: OnTimeout,
    cancel_event: threading.Event,
) -> RunOutcome:
    """Run the test command through the shell and classify it like `git bisect run`.

    0 is good, 125 is skip, 1..127 otherwise is bad; a timeout counts as the caller chose;
    an exit code >= 128 (killed by a signal) stops the bisect, as it stops git's.
    """
    result: ProcessResult = run_process(
        ["/bin/sh", "-c", command], cwd=cwd, env=env, timeout_s=timeout_s, cancel_event=cancel_event
    )
    tail = tail_text(result.output_tail(), STEP_TAIL_CHARS)
    if result.cancelled or cancel_event.is_set():
        raise JobCancelled("cancelled while the test was running")
    if result.timed_out:
        return RunOutcome(
            "skip" if on_timeout == "skip" else "bad",
            None,
            True,
            result.duration_s,
            tail,
            f"timed out after {timeout_s:g} s (counted as {'skip' if on_timeout == 'skip' else 'bad'})",
        )
    rc = result.returncode
    if rc == 0:
        return RunOutcome("good", rc, False, result.duration_s, tail)
    if rc == SKIP_EXIT:
        return RunOutcome(
            "skip", rc, False, result.duration_s, tail, "exit code 125: cannot be tested (skip)"
        )
    if rc is not None and 0 < rc < 128:
        return RunOutcome("bad", rc, False, result.duration_s, tail)
    how = (
        f"was killed by signal {-rc}" if rc is not None and rc < 0 else f"ended with exit code {rc} (>= 128)"
    )
    raise BisectError(
        f"the test command {how}; like `git bisect run`, the bisect stops here. Output tail:\n{tail}",
        "make the command exit 1..127 for a bad result (e.g. wrap it: sh -c 'cmd || exit 1'), "
        "or pass timeout_s so hangs are handled",
    )


def which_uv() -> str:
    """The `uv` binary shipped with the `uv` package (or one on PATH)."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except Exception:
        found = shutil.which("uv")
        if found:
            return found
    from trainsleuth.tools.extras import install_hint

    raise BisectError(
        "the uv binary was not found: environments per version (or per commit with env='uv') need the "
        "optional extra [bisect]",
        install_hint("bisect"),
    )

"""Run the approved reproducer: in the workspace, with a timeout, never outliving the server."""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from trainsleuth.protocol.ledger import ProtocolError

WATCHDOG = Path(__file__).with_name("_watchdog.py")


@dataclass
class ReproducerRun:
    command: str
    exit_code: int | None
    timed_out: bool
    output_tail: str
    duration_s: float

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def verdict(self) -> str:
        if self.timed_out:
            return "timed out"
        return "passed" if self.passed else f"failed (exit code {self.exit_code})"


def run_reproducer(
    command: str, workspace: Path, timeout_s: float, cancel_event: threading.Event | None = None
) -> ReproducerRun:
    """Run `command` with /bin/sh in `workspace` under the watchdog; cancellation is a ProtocolError."""
    from trainsleuth.process import run_process

    argv = [sys.executable, "-I", "-S", str(WATCHDOG), str(os.getpid()), "/bin/sh", "-c", command]
    try:
        proc = run_process(argv, cwd=workspace, timeout_s=timeout_s, cancel_event=cancel_event)
    except (FileNotFoundError, PermissionError) as exc:
        raise ProtocolError(f"cannot run the reproducer: {exc}", "check the reproducer command") from exc
    if proc.cancelled:
        raise ProtocolError(
            "the call was cancelled before the reproducer finished; nothing was recorded",
            "call it again",
        )
    return ReproducerRun(
        command=command,
        exit_code=proc.returncode,
        timed_out=proc.timed_out,
        output_tail=proc.output_tail(),
        duration_s=proc.duration_s,
    )

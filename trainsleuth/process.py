"""Run a child process with a timeout, an optional memory ceiling and cancellation.

Every diagnostic that executes user code goes through here, so the whole process tree
is always reaped: on timeout, on exceeding the memory limit, and when the caller cancels.
Output goes to temporary files (never pipes), so a chatty child can never deadlock us,
and only a bounded tail is kept.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

TAIL_CHARS = 4000


@dataclass
class ProcessResult:
    argv: list[str]
    returncode: int | None
    stdout_tail: str
    stderr_tail: str
    duration_s: float
    timed_out: bool = False
    cancelled: bool = False
    memory_exceeded: bool = False
    peak_rss_mb: float | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not (self.timed_out or self.cancelled or self.memory_exceeded)

    def output_tail(self, limit: int = TAIL_CHARS) -> str:
        text = self.stdout_tail
        if self.stderr_tail:
            text = (text + "\n" if text else "") + self.stderr_tail
        return tail_text(text, limit)


def tail_text(text: str, limit: int = TAIL_CHARS) -> str:
    if len(text) <= limit:
        return text
    return "…" + text[-(limit - 1) :]


def _read_tail(path: Path, limit: int) -> str:
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            if size > limit * 4:
                fh.seek(size - limit * 4)
            data = fh.read()
    except OSError:
        return ""
    return tail_text(data.decode("utf-8", errors="replace"), limit)


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> None:
    """Kill a process and every descendant, including ones that started their own session."""
    import psutil

    try:
        parent = psutil.Process(pid)
        procs = [parent, *parent.children(recursive=True)]
    except psutil.Error:
        procs = []
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    for proc in procs:
        try:
            proc.send_signal(sig)
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=3)


def _tree_rss_mb(pid: int) -> float:
    import psutil

    try:
        parent = psutil.Process(pid)
        total = parent.memory_info().rss
        for child in parent.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.Error:
                pass
    except psutil.Error:
        return 0.0
    return total / (1024 * 1024)


def run_process(
    argv: Sequence[str],
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    memory_limit_mb: float | None = None,
    cancel_event: threading.Event | None = None,
    stdin_text: str | None = None,
    tail_chars: int = TAIL_CHARS,
    poll_s: float = 0.05,
) -> ProcessResult:
    """Run `argv` to completion (or until killed) and return its exit status and output tails.

    Raises FileNotFoundError / PermissionError if the program cannot be started at all, so
    callers can tell "command not found" from "command failed".
    """
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="trainsleuth-proc-") as tmp:
        out_path = Path(tmp) / "stdout"
        err_path = Path(tmp) / "stderr"
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen(
                list(argv),
                cwd=str(cwd) if cwd is not None else None,
                env=dict(env) if env is not None else None,
                stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            if stdin_text is not None and proc.stdin is not None:
                try:
                    proc.stdin.write(stdin_text.encode())
                    proc.stdin.close()
                except BrokenPipeError:
                    pass
            timed_out = cancelled = memory_exceeded = False
            peak = 0.0
            next_mem_check = 0.0
            while True:
                rc = proc.poll()
                if rc is not None:
                    break
                now = time.monotonic()
                if timeout_s is not None and now - start > timeout_s:
                    timed_out = True
                elif cancel_event is not None and cancel_event.is_set():
                    cancelled = True
                elif memory_limit_mb is not None and now >= next_mem_check:
                    next_mem_check = now + 0.2
                    rss = _tree_rss_mb(proc.pid)
                    peak = max(peak, rss)
                    if rss > memory_limit_mb:
                        memory_exceeded = True
                if timed_out or cancelled or memory_exceeded:
                    kill_tree(proc.pid)
                    proc.wait()
                    break
                time.sleep(poll_s)
            # A finished leader may leave grandchildren behind in its session; reap them too.
            kill_tree(proc.pid)
        return ProcessResult(
            argv=list(argv),
            returncode=proc.returncode,
            stdout_tail=_read_tail(out_path, tail_chars),
            stderr_tail=_read_tail(err_path, tail_chars),
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
            cancelled=cancelled,
            memory_exceeded=memory_exceeded,
            peak_rss_mb=peak or None,
        )

"""Server-side launcher for the standalone runners: the user's interpreter, a timeout, JSON back."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainsleuth.process import ProcessResult, run_process

RUNNERS_DIR = Path(__file__).resolve().parent


class RunnerError(Exception):
    """The runner could not produce a report; `kind` says why in machine-readable form."""

    def __init__(self, kind: str, message: str, *, key: str | None = None, detail: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.key = key
        self.detail = detail


@dataclass
class RunnerOutcome:
    payload: dict[str, Any]
    process: ProcessResult
    interpreter: Path


def runner_path(name: str) -> Path:
    path = RUNNERS_DIR / name
    if not path.exists():
        raise FileNotFoundError(f"runner script {name} is missing from {RUNNERS_DIR}")
    return path


def run_runner(
    script: str,
    args: list[str],
    *,
    python: Path,
    cwd: Path,
    timeout_s: float,
    memory_limit_mb: float | None = None,
    cancel_event: threading.Event | None = None,
    env: dict[str, str] | None = None,
) -> RunnerOutcome:
    """Run `script` from this folder under `python`; it must write JSON to the `--result` path.

    Raises RunnerError with kind `timeout`, `out_of_memory`, `cancelled`, `no_torch`,
    `interpreter_failed` or the runner's own error kind (e.g. `contract_error`).
    """
    full_env = dict(os.environ if env is None else env)
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    full_env["PYTHONDONTWRITEBYTECODE"] = "1"
    with tempfile.TemporaryDirectory(prefix="trainsleuth-run-") as tmp:
        result_path = Path(tmp) / "result.json"
        argv = [str(python), str(runner_path(script)), "--result", str(result_path), *args]
        try:
            proc = run_process(
                argv,
                cwd=cwd,
                env=full_env,
                timeout_s=timeout_s,
                memory_limit_mb=memory_limit_mb,
                cancel_event=cancel_event,
            )
        except (FileNotFoundError, PermissionError) as exc:
            raise RunnerError("interpreter_failed", f"cannot start interpreter {python}: {exc}") from exc
        if proc.timed_out:
            raise RunnerError(
                "timeout",
                f"the run did not finish within {timeout_s:g}s and was killed (with its child processes)",
                detail=proc.output_tail(),
            )
        if proc.cancelled:
            raise RunnerError("cancelled", "the run was cancelled and its process tree killed")
        if proc.memory_exceeded:
            raise RunnerError(
                "out_of_memory",
                f"the run exceeded the memory limit of {memory_limit_mb:g} MB and was killed",
                detail=proc.output_tail(),
            )
        if result_path.exists():
            try:
                payload = json.loads(result_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise RunnerError("runner_failed", f"the runner wrote an unreadable report: {exc}") from exc
            if not payload.get("ok", False):
                err = payload.get("error") or {}
                raise RunnerError(
                    str(err.get("kind", "runner_failed")),
                    str(err.get("message", "the runner reported an error")),
                    key=err.get("key"),
                    detail=err.get("traceback"),
                )
            return RunnerOutcome(payload=payload, process=proc, interpreter=python)
        tail = proc.output_tail()
        if "No module named 'torch'" in tail:
            raise RunnerError(
                "no_torch",
                f"torch is not installed in the target interpreter {python}; install it there or pass --python",
                detail=tail,
            )
        if "out of memory" in tail.lower() or "MemoryError" in tail or proc.returncode in (-9, 137):
            raise RunnerError("out_of_memory", "the run ran out of memory", detail=tail)
        raise RunnerError(
            "runner_failed",
            f"the runner exited with code {proc.returncode} without a report",
            detail=tail,
        )

"""What a playbook does besides calling tools: the person's dialog answers, files the assistant
writes, commands it runs, and following jobs that a long tool handed back.

A playbook stands for an assistant *and* the person behind it walking an investigation end to end
(CI, the agent benchmark). Three things need more than a tool call:

- `write: {path, text}`: the assistant writes a file inside the workspace (an entrypoint under
  `.trainsleuth/scratch/`, a fix). Paths that leave the workspace are refused.
- `shell: COMMAND`: the assistant runs a command in the workspace (`/bin/sh -c`), e.g.
  `git apply "$PLAYBOOK_DIR/fix.patch"`. `PLAYBOOK_DIR` and `WORKSPACE` are set; `timeout_s`
  bounds it (default 600). A non-zero exit is an error unless `expect: {is_error: true}`.
- `dialog:` on a tool step: when the server asks the person (MCP elicitation, e.g. the approval
  dialog of approve_diagnosis), the playbook answers. It must say who stands in for the person:
  `stand_in` is required, and is sent as the dialog's `name`, so the approval record names the
  playbook, not a person. The client also declares itself as `trainsleuth-playbook`.
  A dialog the step did not expect is dismissed (cancel) and fails the step.

A long tool that answers with a job id (still running after the server's call wait) is followed
with `get_job(wait_s=40)` until it finishes; the step's result is then the tool's own result, and
`job_polls` says how many get_job calls that took.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DIALOG_KEYS = {"stand_in", "action", "answer"}
DIALOG_ACTIONS = ("accept", "decline", "cancel")
CLIENT_NAME = "trainsleuth-playbook"
SHELL_TIMEOUT_S = 600.0
OUTPUT_TAIL = 4000
JOB_WAIT_S = 40
MAX_JOB_POLLS = 200


class PlaybookStepError(Exception):
    """A step that cannot run as written (usage: exit 2)."""


def check_dialog(index: int, dialog: Any) -> dict[str, Any]:
    """Validate a step's `dialog:` answer; returns it normalised."""
    if not isinstance(dialog, Mapping):
        raise PlaybookStepError(f"step {index}: 'dialog' must be a mapping with stand_in, action, answer")
    unknown = set(dialog) - DIALOG_KEYS
    if unknown:
        raise PlaybookStepError(
            f"step {index}: unknown dialog key(s) {sorted(unknown)}; known: {sorted(DIALOG_KEYS)}"
        )
    stand_in = str(dialog.get("stand_in") or "").strip()
    if not stand_in:
        raise PlaybookStepError(
            f"step {index}: a dialog answer must say who answers it instead of the person: "
            "stand_in: 'playbook NAME (CI), standing in for the person'"
        )
    action = str(dialog.get("action") or "accept")
    if action not in DIALOG_ACTIONS:
        raise PlaybookStepError(f"step {index}: dialog action must be one of {list(DIALOG_ACTIONS)}")
    answer = dialog.get("answer") or {}
    if not isinstance(answer, Mapping):
        raise PlaybookStepError(f"step {index}: dialog 'answer' must be a mapping (the dialog's fields)")
    if "name" in answer:
        raise PlaybookStepError(f"step {index}: the dialog's name is the stand_in; do not give answer.name")
    return {"stand_in": stand_in, "action": action, "answer": dict(answer)}


class DialogAnswers:
    """The elicitation callback of a playbook run: answers with the current step's `dialog:`."""

    def __init__(self) -> None:
        self.current: dict[str, Any] | None = None
        self.asked: list[str] = []
        self.unexpected: list[str] = []

    def expect(self, dialog: dict[str, Any] | None) -> None:
        self.current = dialog
        self.asked = []
        self.unexpected = []

    async def __call__(self, context: Any, params: Any) -> Any:
        from mcp_types import ElicitResult

        message = str(getattr(params, "message", "") or "")
        self.asked.append(message)
        if self.current is None:
            self.unexpected.append(message)
            return ElicitResult(action="cancel")
        if self.current["action"] != "accept":
            return ElicitResult(action=self.current["action"])
        content = {**self.current["answer"], "name": self.current["stand_in"]}
        return ElicitResult(action="accept", content=content)


def inside(workspace: Path, relative: str) -> Path:
    """`relative` resolved inside `workspace`; refuses absolute paths and paths that leave it."""
    path = Path(relative)
    if path.is_absolute():
        raise PlaybookStepError(f"write: {relative!r} must be relative to the workspace")
    root = workspace.resolve()
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        raise PlaybookStepError(f"write: {relative!r} leaves the workspace {root}")
    return target


def write_file(workspace: Path, spec: Any) -> tuple[str, dict[str, Any]]:
    if not isinstance(spec, Mapping) or not isinstance(spec.get("path"), str) or "text" not in spec:
        raise PlaybookStepError("write: needs {path: relative/path, text: ...}")
    target = inside(workspace, spec["path"])
    text = str(spec["text"])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    size = len(text.encode("utf-8"))
    return f"wrote {spec['path']} ({size} bytes)", {"path": spec["path"], "bytes": size}


def run_shell(
    workspace: Path, command: str, playbook_dir: Path, timeout_s: float | None
) -> tuple[bool, str, dict[str, Any]]:
    """(failed, output tail, structured) of `command` run with /bin/sh in the workspace."""
    env = {**os.environ, "PLAYBOOK_DIR": str(playbook_dir), "WORKSPACE": str(workspace)}
    started = time.monotonic()
    try:
        proc = subprocess.run(
            ["/bin/sh", "-c", command],
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s or SHELL_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or "") if isinstance(exc.stdout, str) else ""
        return (
            True,
            f"timed out after {exc.timeout:g} s\n{out[-OUTPUT_TAIL:]}",
            {"exit_code": None, "timed_out": True},
        )
    output = (proc.stdout + proc.stderr)[-OUTPUT_TAIL:]
    data = {"exit_code": proc.returncode, "timed_out": False, "seconds": round(time.monotonic() - started, 3)}
    return proc.returncode != 0, output, data


def pending_job(structured: Any) -> str | None:
    """The job id when a tool handed back a job that is still running, else None."""
    if not isinstance(structured, Mapping):
        return None
    job_id, status = structured.get("job_id"), structured.get("status")
    if (
        isinstance(job_id, str)
        and status in ("queued", "running")
        and "get_job" in str(structured.get("next_step", ""))
    ):
        return job_id
    return None

"""A scripted MCP client for CI: one tool call, or a playbook of calls with expectations.

It talks real MCP to a server it starts over stdio (default: `trainsleuth serve` from this
installation) or to a streamable-HTTP URL (optionally with a bearer token).

Exit codes (also `trainsleuth client --help`):
    0  every call succeeded and every expectation held
    1  an expectation failed (for example: the log has an event at or above `fail_on`)
    2  usage: bad arguments or an invalid playbook
    3  the server or a tool failed (cannot start or reach the server, a tool answered isError)

Playbook (YAML)::

    server:                     # optional; default: trainsleuth serve --workspace <playbook folder>
      command: [trainsleuth, serve, --workspace, .]   # or: url: http://127.0.0.1:8765/mcp
      token_env: TRAINSLEUTH_TOKEN                     # with url: the bearer token's variable
    steps:
      - name: log                       # results are kept under this name
        tool: analyze_training_log
        args: {path: train.log}
        expect:
          fail_on: warning              # no event/finding at or above this severity
          equals: {format: megatron}    # dotted paths into the structured result
          min_items: {events: 0}
          max_items: {events: 3}
          contains: "healthy"           # text of the result
          is_error: false               # default; true expects the tool to refuse
      - read_resource: protocol://debugging
        expect: {contains: "Root cause first"}
      - tool: get_investigation
        args: {investigation_id: "${start.investigation_id}"}   # values from an earlier step
      - write: {path: .trainsleuth/scratch/entry.py, text: "..."}   # the assistant writes a file
      - shell: git apply "$PLAYBOOK_DIR/fix.patch"                  # ... or runs a command
      - tool: approve_diagnosis
        args: {investigation_id: "${start.investigation_id}"}
        dialog:                         # the playbook answers the person's dialog, and says so
          stand_in: "playbook X (CI), standing in for the person"
          answer: {decision: approve, comment: "..."}

`${workspace}` and `${playbook_dir}` are the workspace and the playbook's folder. The workspace is
the playbook's folder unless `trainsleuth client run --workspace DIR` names another. Step kinds
beyond tool calls, dialogs and job following: `clients/playbook_steps.py`.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXIT_OK = 0
EXIT_EXPECTATION = 1
EXIT_USAGE = 2
EXIT_ERROR = 3

SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2, "critical": 3}
LIST_FIELDS_WITH_SEVERITY = ("events", "findings")


class UsageError(Exception):
    """Bad arguments or playbook: exit 2."""


class ServerError(Exception):
    """The server cannot be started or reached, or a call failed at the protocol level: exit 3."""


def default_server_command(workspace: Path | None = None) -> list[str]:
    launcher = Path(sys.executable).parent / ("trainsleuth.exe" if os.name == "nt" else "trainsleuth")
    cmd = [str(launcher)] if launcher.exists() else [sys.executable, "-m", "trainsleuth"]
    cmd.append("serve")
    if workspace is not None:
        cmd += ["--workspace", str(workspace)]
    return cmd


@dataclass
class ServerTarget:
    command: list[str] = field(default_factory=list)
    url: str | None = None
    token: str | None = None
    cwd: Path | None = None
    # The default server of `trainsleuth client call|tools|describe`: kept alive between calls (clients/keep.py).
    keep: bool = False

    def describe(self) -> str:
        return self.url or " ".join(self.command)


def parse_arg(item: str) -> tuple[str, Any]:
    """`key=value`: the value is read as JSON when it is valid JSON (numbers, true, lists), else a string."""
    if "=" not in item:
        raise UsageError(f"--arg {item!r}: expected key=value")
    key, raw = item.split("=", 1)
    if not key:
        raise UsageError(f"--arg {item!r}: the key is empty")
    try:
        value: Any = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key, value


def open_client(target: ServerTarget, elicitation_callback: Any = None, client_info: Any = None) -> Any:
    from mcp import Client, StdioServerParameters

    if target.url:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        headers = {"Authorization": f"Bearer {target.token}"} if target.token else None
        transport: AbstractAsyncContextManager[Any] = streamable_http_client(
            target.url, http_client=create_mcp_http_client(headers=headers)
        )
        return Client(transport, elicitation_callback=elicitation_callback, client_info=client_info)
    if not target.command:
        raise UsageError("no server command given")
    params = StdioServerParameters(
        command=target.command[0],
        args=target.command[1:],
        env=dict(os.environ),
        cwd=str(target.cwd) if target.cwd else None,
    )
    return Client(params, elicitation_callback=elicitation_callback, client_info=client_info)


# ------------------------------------------------------------------------------ results


@dataclass
class StepResult:
    name: str
    kind: str  # "tool" or "resource"
    target: str
    is_error: bool
    text: str
    structured: Any
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    job_polls: int = 0  # get_job calls made to follow a job the tool handed back

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            self.kind: self.target,
            "is_error": self.is_error,
            "structured": self.structured,
            "text": self.text,
            "failures": self.failures,
            "seconds": round(self.seconds, 3),
            "job_polls": self.job_polls,
        }


def _text_of(content: Sequence[Any]) -> str:
    parts = []
    for block in content:
        text = getattr(block, "text", None)
        if text is not None:
            parts.append(str(text))
        elif getattr(block, "type", None) == "image":
            parts.append(f"[image {getattr(block, 'mime_type', '')}]")
    return "\n".join(parts)


async def call_tool(client: Any, name: str, args: Mapping[str, Any], label: str | None = None) -> StepResult:
    result = await client.call_tool(name, dict(args))
    return StepResult(
        label or name,
        "tool",
        name,
        bool(result.is_error),
        _text_of(result.content),
        result.structured_content,
    )


async def read_resource(client: Any, uri: str, label: str | None = None) -> StepResult:
    result = await client.read_resource(uri)
    texts = [getattr(c, "text", "") or "" for c in result.contents]
    return StepResult(label or uri, "resource", uri, False, "\n".join(texts), None)


# ------------------------------------------------------------------------------ expectations

_MISSING = object()


def lookup(data: Any, path: str) -> Any:
    """Dotted path into JSON data (`report.events.0.code`); _MISSING when absent."""
    current = data
    for part in path.split(".") if path else []:
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif (
            isinstance(current, list)
            and part.lstrip("-").isdigit()
            and -len(current) <= int(part) < len(current)
        ):
            current = current[int(part)]
        else:
            return _MISSING
    return current


def _severity_items(data: Any) -> list[Mapping[str, Any]]:
    """Every record with a `severity` under an `events` or `findings` list, at any depth."""
    found: list[Mapping[str, Any]] = []
    if isinstance(data, Mapping):
        for key, value in data.items():
            if key in LIST_FIELDS_WITH_SEVERITY and isinstance(value, list):
                found += [v for v in value if isinstance(v, Mapping) and "severity" in v]
            else:
                found += _severity_items(value)
    elif isinstance(data, list):
        for value in data:
            found += _severity_items(value)
    return found


EXPECT_KEYS = {
    "is_error",
    "fail_on",
    "equals",
    "contains",
    "not_contains",
    "min_items",
    "max_items",
    "exists",
}


def check_expectations(step: StepResult, expect: Mapping[str, Any]) -> list[str]:
    unknown = set(expect) - EXPECT_KEYS
    if unknown:
        raise UsageError(
            f"step {step.name!r}: unknown expectation(s) {sorted(unknown)}; known: {sorted(EXPECT_KEYS)}"
        )
    failures: list[str] = []
    want_error = bool(expect.get("is_error", False))
    if step.is_error != want_error:
        failures.append(
            f"expected is_error={want_error}, got is_error={step.is_error}: {step.text.strip()[:500]}"
        )
    level = expect.get("fail_on")
    if level is not None:
        if level not in SEVERITY_RANK:
            raise UsageError(f"step {step.name!r}: fail_on must be one of {list(SEVERITY_RANK)}")
        bad = [
            i
            for i in _severity_items(step.structured)
            if SEVERITY_RANK.get(str(i["severity"]), 0) >= SEVERITY_RANK[level]
        ]
        for item in bad[:20]:
            where = f" at step {item.get('step')}" if item.get("step") is not None else ""
            failures.append(f"[{item['severity']}] {item.get('code')}{where}: {item.get('message', '')}")
        if len(bad) > 20:
            failures.append(f"... and {len(bad) - 20} more at or above {level}")
        if isinstance(step.structured, Mapping) and step.structured.get("verdict") == "not_understood":
            # a log analysis that recognised no loss judged nothing: never a pass
            failures.append(
                "verdict not_understood: nothing was judged (map the keys with roles, e.g. loss=KEY)"
            )
    for path, value in (expect.get("equals") or {}).items():
        got = lookup(step.structured, str(path))
        if got is _MISSING:
            failures.append(f"{path}: missing (expected {value!r})")
        elif got != value:
            failures.append(f"{path}: expected {value!r}, got {got!r}")
    for path in expect.get("exists") or []:
        if lookup(step.structured, str(path)) is _MISSING:
            failures.append(f"{path}: missing")
    for key, bound, op in (("min_items", "at least", min), ("max_items", "at most", max)):
        for path, n in (expect.get(key) or {}).items():
            got = lookup(step.structured, str(path))
            if not isinstance(got, list):
                failures.append(
                    f"{path}: expected a list, got {type(got).__name__ if got is not _MISSING else 'nothing'}"
                )
            elif (op is min and len(got) < n) or (op is max and len(got) > n):
                failures.append(f"{path}: expected {bound} {n} items, got {len(got)}")
    contains = expect.get("contains")
    for needle in [contains] if isinstance(contains, str) else contains or []:
        if needle not in step.text:
            failures.append(f"text does not contain {needle!r}")
    not_contains = expect.get("not_contains")
    for needle in [not_contains] if isinstance(not_contains, str) else not_contains or []:
        if needle in step.text:
            failures.append(f"text contains {needle!r}")
    return failures


# ------------------------------------------------------------------------------ playbooks

_REF = re.compile(r"\$\{([A-Za-z0-9_\-]+)((?:\.[A-Za-z0-9_\-]+)*)\}")


def substitute(value: Any, saved: Mapping[str, Any]) -> Any:
    """Replace `${step.path}` with values from earlier steps' structured results."""
    if isinstance(value, str):
        whole = _REF.fullmatch(value)
        if whole:
            return _resolve_ref(whole, saved)
        return _REF.sub(lambda m: str(_resolve_ref(m, saved)), value)
    if isinstance(value, list):
        return [substitute(v, saved) for v in value]
    if isinstance(value, Mapping):
        return {k: substitute(v, saved) for k, v in value.items()}
    return value


def _resolve_ref(match: re.Match[str], saved: Mapping[str, Any]) -> Any:
    name, path = match.group(1), match.group(2).lstrip(".")
    if name not in saved:
        raise UsageError(f"${{{name}{match.group(2)}}}: no earlier step named {name!r}")
    got = lookup(saved[name], path)
    if got is _MISSING:
        raise UsageError(f"${{{name}{match.group(2)}}}: step {name!r} has no field {path!r}")
    return got


STEP_KINDS = ("tool", "read_resource", "write", "shell")
STEP_KEYS = {*STEP_KINDS, "name", "args", "expect", "dialog", "timeout_s"}
BUILTINS = ("workspace", "playbook_dir")


@dataclass
class Playbook:
    target: ServerTarget
    steps: list[dict[str, Any]]
    workspace: Path = field(default_factory=Path.cwd)  # where write/shell steps act
    base: Path = field(default_factory=Path.cwd)  # the playbook's own folder


def load_playbook(
    path: Path, *, url: str | None = None, token: str | None = None, workspace: Path | None = None
) -> Playbook:
    import yaml

    from trainsleuth.clients.playbook_steps import PlaybookStepError, check_dialog

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read the playbook {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise UsageError(f"the playbook {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, Mapping) or not isinstance(data.get("steps"), list) or not data["steps"]:
        raise UsageError(f"the playbook {path} needs a non-empty 'steps' list")
    unknown_top = set(data) - {"server", "steps", "description"}
    if unknown_top:
        raise UsageError(
            f"the playbook {path}: unknown key(s) {sorted(unknown_top)}; known: description, server, steps"
        )
    base = path.parent.absolute()
    if workspace is not None and not workspace.is_dir():
        raise UsageError(f"--workspace {workspace} is not an existing directory")
    ws = workspace.absolute() if workspace is not None else base
    server = data.get("server") or {}
    if not isinstance(server, Mapping):
        raise UsageError("'server' must be a mapping with 'command' or 'url'")
    if url:
        target = ServerTarget(url=url, token=token)
    elif server.get("url"):
        tok = token or (os.environ.get(str(server["token_env"])) if server.get("token_env") else None)
        if tok is None:
            from trainsleuth.server.tokens import TokenError, find_token

            try:
                tok = find_token(str(server["url"]))[0]  # the token file the server made for its address
            except TokenError as exc:
                raise UsageError(str(exc)) from None
        target = ServerTarget(url=str(server["url"]), token=tok)
    elif server.get("command"):
        cmd = server["command"]
        cmd = cmd.split() if isinstance(cmd, str) else [str(c) for c in cmd]
        if cmd and cmd[0] == "trainsleuth":
            cmd = default_server_command()[:-1] + cmd[1:]
        target = ServerTarget(command=cmd, cwd=ws)
    else:
        target = ServerTarget(command=default_server_command(ws), cwd=ws)
    steps: list[dict[str, Any]] = []
    for i, step in enumerate(data["steps"], 1):
        kinds = [k for k in STEP_KINDS if isinstance(step, Mapping) and k in step]
        if len(kinds) != 1:
            raise UsageError(f"step {i}: give exactly one of {', '.join(repr(k) for k in STEP_KINDS)}")
        if "args" in step and not isinstance(step["args"], Mapping):
            raise UsageError(f"step {i}: 'args' must be a mapping")
        if "expect" in step and not isinstance(step["expect"], Mapping):
            raise UsageError(f"step {i}: 'expect' must be a mapping")
        unknown = set(step) - STEP_KEYS
        if unknown:
            raise UsageError(f"step {i}: unknown key(s) {sorted(unknown)}; known: {sorted(STEP_KEYS)}")
        if step.get("name") in BUILTINS:
            raise UsageError(
                f"step {i}: the name {step['name']!r} is reserved (${{{step['name']}}} is built in)"
            )
        if "dialog" in step and "tool" not in step:
            raise UsageError(f"step {i}: 'dialog' answers a tool call's dialog; give it on a tool step")
        if "shell" in step and not isinstance(step["shell"], str):
            raise UsageError(f"step {i}: 'shell' must be a command line (a string)")
        checked = dict(step)
        if "dialog" in step:
            try:
                checked["dialog"] = check_dialog(i, step["dialog"])
            except PlaybookStepError as exc:
                raise UsageError(str(exc)) from None
        steps.append(checked)
    return Playbook(target, steps, ws, base)


async def _follow_job(client: Any, result: StepResult) -> StepResult:
    """A tool that handed back a running job: get_job until it finishes; the tool's own result."""
    from trainsleuth.clients.playbook_steps import JOB_WAIT_S, MAX_JOB_POLLS, pending_job

    job_id = pending_job(result.structured)
    polls = 0
    while job_id is not None and polls < MAX_JOB_POLLS:
        polls += 1
        got = await call_tool(client, "get_job", {"job_id": job_id, "wait_s": JOB_WAIT_S}, result.name)
        data = got.structured if isinstance(got.structured, Mapping) else {}
        status = data.get("status")
        if got.is_error or status not in ("running", "queued"):
            final = dict(data.get("result") or {}) if status == "succeeded" else dict(data)
            final.update({"job_id": job_id, "status": status})
            failed = got.is_error or status != "succeeded"
            return StepResult(result.name, "tool", result.target, failed, got.text, final, job_polls=polls)
    if job_id is not None:
        result.is_error = True
        result.text += f"\n(the job {job_id} was still running after {polls} get_job calls)"
    result.job_polls = polls
    return result


async def _run_step(
    client: Any, playbook: Playbook, step: Mapping[str, Any], name: str, saved: dict[str, Any], dialogs: Any
) -> StepResult:
    from trainsleuth.clients.playbook_steps import PlaybookStepError, run_shell, write_file

    if "tool" in step:
        dialogs.expect(step.get("dialog"))
        try:
            args = substitute(step.get("args") or {}, saved)
            result = await call_tool(client, str(step["tool"]), args, name)
            result = await _follow_job(client, result)
        finally:
            unexpected = list(dialogs.unexpected)
            dialogs.expect(None)
        if unexpected:
            result.failures.append(
                "the server asked the person (a dialog) and this step has no 'dialog:' answer; it was dismissed: "
                + unexpected[0][:300]
            )
        return result
    if "read_resource" in step:
        return await read_resource(client, str(substitute(step["read_resource"], saved)), name)
    try:
        if "write" in step:
            text, data = write_file(playbook.workspace, substitute(step["write"], saved))
            return StepResult(name, "write", str(data["path"]), False, text, data)
        command = str(substitute(step["shell"], saved))
        timeout = step.get("timeout_s")
        failed, text, data = run_shell(
            playbook.workspace, command, playbook.base, float(timeout) if timeout else None
        )
        return StepResult(name, "shell", command, failed, text, data)
    except PlaybookStepError as exc:
        raise UsageError(str(exc)) from None


async def run_playbook(playbook: Playbook, *, on_step: Any = None) -> tuple[int, list[StepResult]]:
    """Run every step in order; stop at the first server/tool error. Returns (exit code, results)."""
    import time

    from mcp_types import Implementation

    from trainsleuth import __version__
    from trainsleuth.clients.playbook_steps import CLIENT_NAME, DialogAnswers

    results: list[StepResult] = []
    saved: dict[str, Any] = {"workspace": str(playbook.workspace), "playbook_dir": str(playbook.base)}
    code = EXIT_OK
    dialogs = DialogAnswers()
    info = Implementation(name=CLIENT_NAME, version=__version__)
    async with open_client(playbook.target, elicitation_callback=dialogs, client_info=info) as client:
        for i, step in enumerate(playbook.steps, 1):
            kind = next(k for k in STEP_KINDS if k in step)
            name = str(
                step.get("name") or (step[kind] if kind in ("tool", "read_resource") else f"{kind}{i}")
            )
            expect = substitute(step.get("expect") or {}, saved)
            started = time.monotonic()
            result = await _run_step(client, playbook, step, name, saved, dialogs)
            result.seconds = time.monotonic() - started
            result.failures += check_expectations(result, expect)
            saved[name] = result.structured
            results.append(result)
            if on_step is not None:
                on_step(result)
            if result.is_error and not expect.get("is_error", False):
                return EXIT_ERROR, results
            if result.failures:
                code = EXIT_EXPECTATION
    return code, results

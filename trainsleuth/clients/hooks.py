"""The edit gate for clients' pre-tool hooks (Claude Code, Cursor).

The client runs `trainsleuth hook CLIENT` before a tool call and writes the call as JSON on
stdin. The gate decides from the workspace's investigation state
(`trainsleuth.protocol.gate.edit_gate_status`): while an investigation is open without an
approved diagnosis (or halted after three strikes), calls that edit non-test files, and shell
commands that plainly write files, are denied with the reason and the next protocol step, in the
client's own response format. Anything else is left to the client's normal permission flow.

The gate fails closed: if it cannot read its input or decide, it denies.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainsleuth.protocol.location import governing_workspace, governs

# Claude Code's file-editing tools, and their path fields.
CLAUDE_EDIT_TOOLS = {
    "Edit": ("file_path",),
    "MultiEdit": ("file_path",),
    "Write": ("file_path",),
    "NotebookEdit": ("notebook_path", "file_path"),
}
CLAUDE_SHELL_TOOLS = {"Bash"}
# Cursor's preToolUse tool names for edits (several spellings across versions).
CURSOR_EDIT_TOOLS = {
    "Write": ("file_path", "path", "target_file"),
    "Edit": ("file_path", "path", "target_file"),
    "StrReplace": ("file_path", "path", "target_file"),
    "MultiEdit": ("file_path", "path", "target_file"),
    "Delete": ("file_path", "path", "target_file"),
    "NotebookEdit": ("notebook_path", "file_path", "target_notebook"),
    "EditNotebook": ("notebook_path", "file_path", "target_notebook"),
}
CURSOR_SHELL_TOOLS = {"Shell", "Bash", "run_terminal_cmd"}
# Other MCP servers' file-writing tools (e.g. the reference filesystem server), for beforeMCPExecution.
MCP_WRITE_TOOL = re.compile(
    r"(^|[_\-.])(write|edit|create|move|rename|delete|remove|append|patch|replace)([_\-.]|$)", re.I
)
MCP_PATH_FIELDS = ("path", "file_path", "destination", "source", "target", "filename")

_TEST_NAME = re.compile(r"^(test_.*|.*_test|conftest)\.py$|^.*\.(test|spec)\.[a-z]+$", re.I)
_TEST_DIRS = {"tests", "test", "testing", "__tests__", "spec"}


# Investigation artefacts (logs, plots, metrics, checkpoints) are not code or config changes.
_ARTEFACT_SUFFIXES = {
    ".log", ".out", ".err", ".png", ".jpg", ".jpeg", ".svg", ".csv", ".tsv", ".npy", ".npz",
    ".pt", ".pth", ".ckpt", ".safetensors", ".prof", ".trace", ".pstats",
}  # fmt: skip
_ARTEFACT_DIRS = {
    ".trainsleuth",
    "logs",
    "runs",
    "outputs",
    "wandb",
    "mlruns",
    "lightning_logs",
    "__pycache__",
}


def is_test_file(path: Path) -> bool:
    """Tests may be written before the fix (a reproducer is evidence, not a fix)."""
    if _TEST_NAME.match(path.name):
        return True
    return any(part.lower() in _TEST_DIRS for part in path.parts[:-1])


def is_exempt(path: Path) -> bool:
    """Tests and investigation artefacts may be written while the gate is closed."""
    if is_test_file(path) or path.suffix.lower() in _ARTEFACT_SUFFIXES:
        return True
    return any(part in _ARTEFACT_DIRS for part in path.parts[:-1])


@dataclass
class Decision:
    allowed: bool
    reason: str
    next_step: str = ""
    investigation_id: str | None = None
    targets: list[str] = field(default_factory=list)

    def message(self) -> str:
        text = f"trainsleuth edit gate: {self.reason}."
        if self.next_step:
            text += f" Next step: {self.next_step}."
        return text


# ------------------------------------------------------------------------------ shell commands

_SAFE_TARGETS = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"}
_WRAPPERS = {"sudo", "env", "nohup", "time", "nice", "command", "builtin", "exec", "xargs"}
_WRITE_ALL_ARGS = {"rm", "touch", "truncate", "shred", "unlink", "rmdir", "mkdir", "chmod", "chown"}
_WRITE_LAST_ARG = {"cp", "install", "ln", "rsync", "scp"}


def _tokens(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    return list(lexer)


def _split_commands(command: str) -> list[list[str]]:
    """Simple commands of a command line (separators: ; && || | & ( ) and newlines)."""
    lines = [command] if "<<" in command else command.splitlines() or [""]
    commands: list[list[str]] = []
    for line in lines:
        current: list[str] = []
        for token in _tokens(line):
            if token and set(token) <= set(";&|()"):
                commands.append(current)
                current = []
            else:
                current.append(token)
        commands.append(current)
    return [c for c in commands if c]


def _redirect_targets(words: list[str]) -> tuple[list[str], list[str]]:
    """Return (words without redirections, files written by >, >>, >|, &> redirections)."""
    rest: list[str] = []
    targets: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w and set(w) <= set("<>&|") and ">" in w:
            target = words[i + 1] if i + 1 < len(words) else ""
            i += 2
            if w.endswith("&") and (target.isdigit() or target == "-"):
                continue  # 2>&1: duplicates a descriptor, writes no file
            if target and target not in _SAFE_TARGETS:
                targets.append(target)
            continue
        if w and set(w) <= set("<&") and "<" in w:
            i += 2  # input redirection or here-document delimiter
            continue
        rest.append(w)
        i += 1
    return rest, targets


def _edits_in_place(args: list[str]) -> bool:
    for a in args:
        if a.startswith("--in-place"):
            return True
        if a.startswith("-") and not a.startswith("--") and "i" in a[1:].split(".")[0]:
            return True
    return False


def shell_write_targets(command: str) -> list[str]:
    """Files a shell command plainly writes; '' stands for 'writes, target not determinable'."""
    try:
        commands = _split_commands(command)
    except ValueError:
        # Unbalanced quotes: fall back to a plain scan for write operators.
        return [""] if re.search(r">|\btee\b|\bsed\s+-i|\b(cp|mv|rm)\b", command) else []
    written: list[str] = []
    cwd = ""  # `cd DIR` earlier in the line moves where relative targets are
    for raw in commands:
        if raw[0] == "cd":
            dest = raw[1] if len(raw) > 1 else "~"
            cwd = dest if os.path.isabs(dest) or dest.startswith("~") else os.path.join(cwd, dest)
            continue
        for target in _command_targets(raw):
            relative = target and not os.path.isabs(target) and not target.startswith("~")
            written.append(os.path.normpath(os.path.join(cwd, target)) if cwd and relative else target)
    return written


def _command_targets(raw: list[str]) -> list[str]:
    """Files one simple command writes (relative to where it runs)."""
    written: list[str] = []
    words, targets = _redirect_targets(raw)
    written += targets
    while words and (words[0] in _WRAPPERS or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0])):
        words = words[1:]
        while words and words[0].startswith("-"):
            words = words[1:]
    if not words:
        return written
    prog = os.path.basename(words[0])
    args = words[1:]
    operands = [a for a in args if not a.startswith("-")]
    if prog == "tee":
        written += [a for a in operands if a not in _SAFE_TARGETS]
    elif prog in ("sed", "perl") and _edits_in_place(args):
        has_script_option = any(a in ("-e", "-f") or a.startswith("--expression") for a in args)
        written += (operands if has_script_option and prog == "sed" else operands[1:]) or [""]
    elif prog in _WRITE_ALL_ARGS or prog == "mv":  # mv also removes its sources
        written += operands or [""]
    elif prog in _WRITE_LAST_ARG:
        if "-t" in args:
            idx = args.index("-t")
            written += [args[idx + 1]] if idx + 1 < len(args) else [""]
        else:
            written += operands[-1:] or [""]
    elif prog == "dd":
        written += [a[3:] for a in args if a.startswith("of=")]
    elif prog == "patch" or (prog == "git" and args[:1] and args[0] in ("apply", "am", "restore")):
        written.append("")
    elif prog == "git" and args[:1] == ["checkout"] and "--" in args:
        written += args[args.index("--") + 1 :] or [""]
    elif prog == "git" and args[:2] == ["reset", "--hard"]:
        written.append("")
    return written


# ------------------------------------------------------------------------------ workspace and gate


def find_workspace(start: Path) -> Path:
    """The nearest folder at or above `start` holding trainsleuth state, else `start` itself."""
    return governing_workspace(start) or start.absolute()


def _resolve(raw: str, base: Path) -> Path:
    p = Path(os.path.expanduser(raw))
    if not p.is_absolute():
        p = base / p
    return Path(os.path.normpath(p))


def decide(
    targets: Iterable[str],
    *,
    base: Path,
    workspace: Path | None,
    state_path: Path | None,
) -> Decision:
    """Gate the edit of `targets` (paths relative to `base`; '' means unknown files in `base`)."""
    from trainsleuth.protocol.gate import edit_gate_status

    targets = list(targets)
    if not targets:
        return Decision(True, "this call does not edit files")
    paths = [(_resolve(t, base) if t else base / "?") for t in targets]
    # Each edited file is gated by the investigations of the workspace it lies in: the nearest folder
    # above it holding trainsleuth state (or --workspace / --state when given).
    groups: dict[Path, list[Path]] = {}
    for p in paths:
        if p.name != "?" and is_exempt(p):
            continue
        if workspace is not None:
            if not (p == workspace or workspace in p.parents):
                continue  # outside the workspace this hook guards
            root = workspace
        else:
            root = find_workspace(p.parent)
            if state_path is None and not governs(root):
                continue  # no trainsleuth state governs this file
        groups.setdefault(root, []).append(p)
    if not groups:
        return Decision(
            True,
            "only tests, investigation artefacts or files outside any trainsleuth workspace are written",
            targets=targets,
        )
    last = None
    for root, gated in groups.items():
        status = edit_gate_status(root, state_path)
        shown = [str(p) if p.name != "?" else f"files in {p.parent}" for p in gated]
        if not status.allowed:
            return Decision(False, status.reason, status.next_step, status.investigation_id, shown)
        last = Decision(True, status.reason, status.next_step, status.investigation_id, shown)
    assert last is not None
    return last


# ------------------------------------------------------------------------------ client formats


def _first_path(tool_input: Mapping[str, Any], fields: Iterable[str]) -> list[str]:
    for f in fields:
        value = tool_input.get(f)
        if isinstance(value, str) and value:
            return [value]
    return [""]


def _as_mapping(value: Any) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str) and value.strip().startswith("{"):
        parsed = json.loads(value)
        if isinstance(parsed, Mapping):
            return parsed
    return {}


@dataclass
class HookOutcome:
    stdout: str
    stderr: str
    exit_code: int


def claude_code(event: Mapping[str, Any], *, workspace: Path | None, state_path: Path | None) -> HookOutcome:
    """Claude Code PreToolUse: deny with hookSpecificOutput; say nothing when allowed."""
    tool = event.get("tool_name")
    if not isinstance(tool, str):
        raise ValueError("the hook input has no tool_name (is this a PreToolUse hook?)")
    tool_input = _as_mapping(event.get("tool_input"))
    cwd = Path(str(event.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()))
    if tool in CLAUDE_EDIT_TOOLS:
        targets = _first_path(tool_input, CLAUDE_EDIT_TOOLS[tool])
    elif tool in CLAUDE_SHELL_TOOLS:
        targets = shell_write_targets(str(tool_input.get("command", "")))
    elif tool.startswith("mcp__") and MCP_WRITE_TOOL.search(tool.split("__")[-1]):
        targets = [] if tool.startswith("mcp__trainsleuth__") else _first_path(tool_input, MCP_PATH_FIELDS)
    else:
        targets = []
    decision = decide(targets, base=cwd, workspace=workspace, state_path=state_path)
    if decision.allowed:
        # No output: the call goes through Claude Code's normal permission flow (an explicit
        # "allow" would skip the user's own permission prompt).
        return HookOutcome("", "", 0)
    payload = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": decision.message(),
        }
    }
    return HookOutcome(json.dumps(payload) + "\n", "", 0)


def cursor(event: Mapping[str, Any], *, workspace: Path | None, state_path: Path | None) -> HookOutcome:
    """Cursor preToolUse / beforeShellExecution / beforeMCPExecution: {permission, messages}."""
    name = event.get("hook_event_name")
    roots = event.get("workspace_roots") or []
    base_raw = event.get("cwd") or (roots[0] if isinstance(roots, list) and roots else None) or os.getcwd()
    base = Path(str(base_raw))
    if name == "beforeShellExecution":
        targets = shell_write_targets(str(event.get("command", "")))
    elif name == "beforeMCPExecution":
        tool = str(event.get("tool_name", ""))
        server = str(event.get("command", "")) + str(event.get("url", ""))
        is_ours = "trainsleuth" in server
        if MCP_WRITE_TOOL.search(tool) and not is_ours:
            targets = _first_path(_as_mapping(event.get("tool_input")), MCP_PATH_FIELDS)
        else:
            targets = []
    elif name == "preToolUse":
        tool = str(event.get("tool_name", ""))
        tool_input = _as_mapping(event.get("tool_input"))
        if tool in CURSOR_EDIT_TOOLS:
            targets = _first_path(tool_input, CURSOR_EDIT_TOOLS[tool])
        elif tool in CURSOR_SHELL_TOOLS:
            targets = shell_write_targets(str(tool_input.get("command", "")))
        else:
            targets = []
    elif name in ("beforeReadFile", "afterFileEdit", "afterShellExecution", "afterMCPExecution"):
        targets = []
    else:
        raise ValueError(f"unsupported Cursor hook event {name!r}")
    decision = decide(targets, base=base, workspace=workspace, state_path=state_path)
    return HookOutcome(json.dumps(cursor_response(decision)) + "\n", "", 0)


def cursor_response(decision: Decision) -> dict[str, Any]:
    if decision.allowed:
        return {"permission": "allow"}
    msg = decision.message()
    # Current Cursor reads snake_case; early 1.7 builds read camelCase. Both are sent.
    return {
        "permission": "deny",
        "user_message": msg,
        "agent_message": msg,
        "userMessage": msg,
        "agentMessage": msg,
    }


def run_hook(
    client: str, stdin_text: str, *, workspace: Path | None = None, state_path: Path | None = None
) -> HookOutcome:
    """Decide one hook call; on any error of the gate itself, deny (fail closed)."""
    try:
        event = json.loads(stdin_text)
        if not isinstance(event, dict):
            raise ValueError("the hook input is not a JSON object")
        if client == "claude-code":
            return claude_code(event, workspace=workspace, state_path=state_path)
        if client == "cursor":
            return cursor(event, workspace=workspace, state_path=state_path)
        raise ValueError(f"unknown client {client!r}")
    except Exception as exc:  # fail closed on the gate's own errors
        reason = (
            f"trainsleuth edit gate could not decide ({type(exc).__name__}: {exc}); the call is denied "
            "because the gate fails closed. Check the hook input and `trainsleuth hook --help`, or remove "
            "the hook from the client's settings to edit without the gate"
        )
        if client == "cursor":
            body = {"permission": "deny", "user_message": reason, "agent_message": reason}
            body |= {"userMessage": reason, "agentMessage": reason}
            return HookOutcome(json.dumps(body) + "\n", reason + "\n", 2)
        # Claude Code: exit code 2 blocks the call and shows stderr to the model.
        return HookOutcome("", reason + "\n", 2)

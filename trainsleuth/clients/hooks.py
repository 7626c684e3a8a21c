"""The edit gate for clients' pre-tool hooks (Claude Code, Cursor, Windsurf).

The client runs `trainsleuth hook CLIENT` before a tool call and writes the call as JSON on
stdin. The gate decides from the workspace's investigation state
(`trainsleuth.protocol.gate.edit_gate_status`): while an investigation is open without an
approved diagnosis (or halted after three strikes), calls that edit non-test files, and shell
commands that plainly write files, are denied with the reason and the next protocol step, in the
client's own response format. Anything else is left to the client's normal permission flow.

The gate fails closed: if it cannot read its input or decide, it denies.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainsleuth.state.store import STATE_DIR_NAME

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


# Investigation artefacts (logs, plots, profiles) are not code or config changes, wherever they are.
_ARTEFACT_SUFFIXES = {
    ".log", ".out", ".err", ".png", ".jpg", ".jpeg", ".svg", ".prof", ".trace", ".pstats", ".nsys-rep",
    ".qdrep", ".pt.trace.json",
}  # fmt: skip
# Data and checkpoints are artefacts only inside the usual output folders: elsewhere they may be the
# training data or the checkpoint a run resumes from.
_DATA_SUFFIXES = {".csv", ".tsv", ".npy", ".npz", ".pt", ".pth", ".ckpt", ".safetensors", ".json", ".jsonl",
                  ".txt", ".pkl", ".bin", ".h5", ".parquet", ".tfevents"}  # fmt: skip
_ARTEFACT_DIRS = {"logs", "runs", "outputs", "wandb", "mlruns", "lightning_logs"}
STATE_DIR = ".trainsleuth"
SCRATCH_DIR = "scratch"


def _relative_parts(path: Path, root: Path | None) -> tuple[str, ...]:
    if root is not None:
        try:
            return path.relative_to(root).parts
        except ValueError:
            pass
    return path.parts


def is_test_file(path: Path, root: Path | None = None) -> bool:
    """Tests may be written before the fix (a reproducer is evidence, not a fix)."""
    parts = _relative_parts(path, root)
    if _TEST_NAME.match(path.name):
        return True
    return any(part.lower() in _TEST_DIRS for part in parts[:-1]) or (
        bool(parts) and parts[-1].lower() in _TEST_DIRS and not path.suffix
    )


def in_scratch(path: Path) -> bool:
    """`.trainsleuth/scratch/` is the assistant's scratch folder, writable at every phase."""
    parts = path.parts
    return any(parts[i] == STATE_DIR and parts[i + 1] == SCRATCH_DIR for i in range(len(parts) - 1))


def is_protected(path: Path, pattern: bool = False) -> bool:
    """trainsleuth's own state (`.trainsleuth/` outside `scratch/`): only the server writes there."""
    parts = path.parts
    for i, part in enumerate(parts):
        matches = part == STATE_DIR or (
            pattern and part.startswith(".") and fnmatch.fnmatchcase(STATE_DIR, part)
        )
        if matches:
            return not (i + 1 < len(parts) and parts[i + 1] == SCRATCH_DIR)
    return False


def is_exempt(path: Path, root: Path | None = None, pattern: bool = False) -> bool:
    """Tests, scratch files and investigation artefacts may be written while the gate is closed."""
    if in_scratch(path) and not (pattern and ".." in path.parts):
        return True
    if is_test_file(path, root):
        return True
    suffix = "".join(path.suffixes[-2:]) if path.name.endswith(".pt.trace.json") else path.suffix.lower()
    if suffix in _ARTEFACT_SUFFIXES:
        return True
    parts = _relative_parts(path, root)
    in_outputs = any(part in _ARTEFACT_DIRS for part in parts[:-1])
    # Data and checkpoints inside output folders; a folder there (no suffix: `mkdir -p logs/exp2`) too.
    return in_outputs and (suffix in _DATA_SUFFIXES or (not suffix and not pattern))


def really_exempt(path: Path, root: Path | None, pattern: bool = False) -> bool:
    """`is_exempt` for the file a write really reaches: symlinks followed, hard links refused."""
    if not is_exempt(path, root, pattern):
        return False
    if pattern:
        return is_exempt(Path(os.path.realpath(path.parent)) / path.name, _real(root), pattern)
    real = Path(os.path.realpath(path))
    if real != path and not is_exempt(real, _real(root)):
        return False  # a link in an exempt place (tests/x.py -> ../train.py) reaches a gated file
    # A second hard link of a file: writing one changes the other, which may be gated.
    return not _hard_linked(real)


def _real(root: Path | None) -> Path | None:
    return Path(os.path.realpath(root)) if root is not None else None


@dataclass
class Decision:
    allowed: bool
    reason: str
    next_step: str = ""
    investigation_id: str | None = None
    targets: list[str] = field(default_factory=list)
    ask: bool = False  # let the client ask the person (approval tools)

    def message(self) -> str:
        text = f"trainsleuth edit gate: {self.reason}."
        if self.next_step:
            text += f" Next step: {self.next_step}."
        return text


@dataclass(frozen=True)
class Target:
    """A write the gate judges: a path (absolute) or None for an unknown place, and why."""

    path: Path | None
    why: str
    pattern: bool = False

    def shown(self) -> str:
        if self.path is None:
            return f"files the gate cannot determine ({self.why})"
        where = str(self.path)
        if not self.pattern:
            real = os.path.realpath(self.path)
            if real != where:
                where += f", which leads to {real}"
            elif _hard_linked(self.path):
                where += ", a hard link that shares its content with another file"
        return f"{where} ({self.why})"


def _hard_linked(path: Path) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_nlink > 1


def shell_targets(command: str, base: Path) -> list[Target]:
    """The writes of a shell command run in `base`, parsed with a real bash parser."""
    from trainsleuth.clients.gate.shell import shell_writes

    out: list[Target] = []
    for w in shell_writes(command, base=str(base)):
        out.append(Target(None if w.path is None else _resolve(w.path, base), w.why, w.pattern))
    return out


def shell_write_targets(command: str) -> list[str]:
    """Paths a shell command writes, as written ('' for a place the analysis cannot determine)."""
    from trainsleuth.clients.gate.shell import shell_writes

    return [w.path or "" for w in shell_writes(command)]


# ------------------------------------------------------------------------------ workspace and gate


def find_workspace(start: Path) -> Path:
    """The nearest folder at or above `start` holding trainsleuth state (`.trainsleuth/`), else the
    nearest git work tree, else `start` itself."""
    start = start.absolute()
    git_root: Path | None = None
    for folder in (start, *start.parents):
        if (folder / STATE_DIR_NAME).is_dir():
            return folder
        if git_root is None and (folder / ".git").exists():
            git_root = folder
    return git_root or start


def _resolve(raw: str | Path, base: Path) -> Path:
    p = Path(os.path.expanduser(str(raw)))
    if not p.is_absolute():
        p = base / p
    return Path(os.path.normpath(p))


def _sealed_writes(
    items: list[Target], command: str | None, *, base: Path, workspace: Path | None, state_path: Path | None
) -> list[Target]:
    """Writes that reach the sealed state folder outside the workspace (`clients/gate/sealed.py`)."""
    from trainsleuth.clients.gate.sealed import hints_state, names_state, reaches_state, state_folders

    ws = workspace or find_workspace(base)
    folders = state_folders(ws, state_path)
    keep = [base.absolute(), ws.absolute()]
    found = [
        t
        for t in items
        if t.path is not None and reaches_state(t.path, folders, pattern=t.pattern, keep=keep)
    ]
    if found or command is None:
        return found
    # A command that spells the folder's path and writes anything (`ln -s STATE st && echo x > st/k`),
    # or writes where the gate cannot see (`python -c`, `$VAR`) and points at the state some other way.
    unknown = [t for t in items if t.path is None]
    if names_state(command, folders) or (unknown and hints_state(command)):
        why = (unknown or items)[0].why
        found.append(Target(None, f"{why}, in a command that names the state folder"))
    return found


def _gate_status(root: Path, state_path: Path | None) -> Any:
    """The protocol's answer for `root`; when the state cannot be read, a closed gate saying why."""
    from trainsleuth.protocol.gate import GateStatus, edit_gate_status

    try:
        return edit_gate_status(root, state_path)
    except Exception as exc:  # fail closed: the state cannot be read or trusted
        return GateStatus(
            False,
            f"the trainsleuth state of {root} cannot be read ({type(exc).__name__}: {exc}), so the gate "
            "stays closed",
            "run get_investigation through the trainsleuth server to see what is wrong with the state",
            None,
        )


def decide(
    targets: Iterable[Target | str],
    *,
    base: Path,
    workspace: Path | None,
    state_path: Path | None,
    command: str | None = None,
) -> Decision:
    """Gate the writes of one tool call (`targets`; a str is a path relative to `base`, '' unknown;
    `command`: the shell command they come from, if any)."""
    items = [
        t if isinstance(t, Target) else Target(_resolve(t, base) if t else None, "edit") for t in targets
    ]
    if not items:
        return Decision(True, "this call does not edit files")
    protected = [t for t in items if t.path is not None and is_protected(t.path, t.pattern)]
    if protected:
        return Decision(
            False,
            f"this call writes trainsleuth's own state ({protected[0].shown()}); only the trainsleuth server "
            "writes under .trainsleuth/ (scratch files belong in .trainsleuth/scratch/)",
            "use the trainsleuth MCP tools to change the investigation",
            None,
            [t.shown() for t in protected],
        )
    sealed = _sealed_writes(items, command, base=base, workspace=workspace, state_path=state_path)
    if sealed:
        return Decision(
            False,
            f"this call writes trainsleuth's sealed investigation state ({sealed[0].shown()}); only the "
            "trainsleuth server writes there, at every phase",
            "use the trainsleuth MCP tools to change the investigation (get_investigation shows it)",
            None,
            [t.shown() for t in sealed],
        )
    # Each written file is gated by the investigations of the workspace it lies in: the nearest folder
    # above it holding trainsleuth state (or --workspace / --state when given). A write whose place is
    # unknown is gated by the workspace of the hook's own folder.
    groups: dict[Path, list[Target]] = {}
    for t in items:
        if t.path is None:
            root = workspace or find_workspace(base)
        elif workspace is not None:
            if not (t.path == workspace or workspace in t.path.parents):
                continue  # outside the workspace this hook guards
            root = workspace
        else:
            root = find_workspace(t.path if t.path.is_dir() else t.path.parent)
        if t.path is not None and really_exempt(t.path, root, t.pattern):
            continue
        groups.setdefault(root, []).append(t)
    if not groups:
        return Decision(True, "only tests, scratch files or investigation artefacts are written", targets=[])
    last = None
    for root, gated in groups.items():
        status = _gate_status(root, state_path)
        shown = [t.shown() for t in gated]
        if not status.allowed:
            listed = "; ".join(shown[:3]) + (f"; and {len(shown) - 3} more" if len(shown) > 3 else "")
            reason = f"{status.reason}. This call writes {listed}"
            return Decision(False, reason, status.next_step, status.investigation_id, shown)
        last = Decision(True, status.reason, status.next_step, status.investigation_id, shown)
    assert last is not None
    return last


# ------------------------------------------------------------------------------ client formats


def _paths(tool_input: Mapping[str, Any], fields: Iterable[str]) -> list[str]:
    """Every path an edit tool's input names ('' when it names none: an unknown file)."""
    found: list[str] = []
    for f in fields:
        value = tool_input.get(f)
        if isinstance(value, str) and value:
            found.append(value)
        elif isinstance(value, list):
            found += [v for v in value if isinstance(v, str) and v]
    return found or [""]


def _as_mapping(value: Any) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str) and value.strip().startswith("{"):
        parsed = json.loads(value)
        if isinstance(parsed, Mapping):
            return parsed
    return {}


# Protocol tools whose call is a person's decision: clients that can ask the person do so.
APPROVAL_TOOLS = frozenset({"approve_diagnosis"})
ASK_REASON = (
    "approving a diagnosis is the person's decision, not the assistant's: read the diagnosis and its "
    "reproducer, then allow this call only if you approve it"
)


@dataclass
class HookOutcome:
    stdout: str
    stderr: str
    exit_code: int


def claude_code(event: Mapping[str, Any], *, workspace: Path | None, state_path: Path | None) -> HookOutcome:
    """Claude Code PreToolUse: deny (or ask) with hookSpecificOutput; say nothing when allowed."""
    tool = event.get("tool_name")
    if not isinstance(tool, str):
        raise ValueError("the hook input has no tool_name (is this a PreToolUse hook?)")
    tool_input = _as_mapping(event.get("tool_input"))
    cwd = Path(str(event.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()))
    targets: list[Target | str]
    command = None
    if tool.startswith("mcp__") and tool.split("__")[-1] in APPROVAL_TOOLS:
        return HookOutcome(json.dumps(_claude_payload("ask", ASK_REASON)) + "\n", "", 0)
    if tool in CLAUDE_EDIT_TOOLS:
        targets = list(_paths(tool_input, CLAUDE_EDIT_TOOLS[tool]))
    elif tool in CLAUDE_SHELL_TOOLS:
        command = str(tool_input.get("command", ""))
        targets = list(shell_targets(command, cwd))
    elif tool.startswith("mcp__") and MCP_WRITE_TOOL.search(tool.split("__")[-1]):
        targets = [] if tool.startswith("mcp__trainsleuth__") else list(_paths(tool_input, MCP_PATH_FIELDS))
    else:
        targets = []
    decision = decide(targets, base=cwd, workspace=workspace, state_path=state_path, command=command)
    if decision.allowed:
        # No output: the call goes through Claude Code's normal permission flow (an explicit
        # "allow" would skip the user's own permission prompt).
        return HookOutcome("", "", 0)
    return HookOutcome(json.dumps(_claude_payload("deny", decision.message())) + "\n", "", 0)


def _claude_payload(decision: str, reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }


def cursor(event: Mapping[str, Any], *, workspace: Path | None, state_path: Path | None) -> HookOutcome:
    """Cursor preToolUse / beforeShellExecution / beforeMCPExecution: {permission, messages}."""
    name = event.get("hook_event_name")
    roots = event.get("workspace_roots") or []
    base_raw = event.get("cwd") or (roots[0] if isinstance(roots, list) and roots else None) or os.getcwd()
    base = Path(str(base_raw))
    targets: list[Target | str] = []
    command = None
    if name == "beforeShellExecution":
        command = str(event.get("command", ""))
        targets = list(shell_targets(command, base))
    elif name == "beforeMCPExecution":
        tool = str(event.get("tool_name", ""))
        server = str(event.get("command", "")) + str(event.get("url", ""))
        is_ours = "trainsleuth" in server
        if is_ours and tool in APPROVAL_TOOLS:
            return HookOutcome(json.dumps(_cursor_body("ask", ASK_REASON)) + "\n", "", 0)
        if MCP_WRITE_TOOL.search(tool) and not is_ours:
            targets = list(_paths(_as_mapping(event.get("tool_input")), MCP_PATH_FIELDS))
    elif name == "preToolUse":
        tool = str(event.get("tool_name", ""))
        tool_input = _as_mapping(event.get("tool_input"))
        if tool in CURSOR_EDIT_TOOLS:
            targets = list(_paths(tool_input, CURSOR_EDIT_TOOLS[tool]))
        elif tool in CURSOR_SHELL_TOOLS:
            command = str(tool_input.get("command", ""))
            targets = list(shell_targets(command, base))
    elif name in ("beforeReadFile", "afterFileEdit", "afterShellExecution", "afterMCPExecution"):
        targets = []
    else:
        raise ValueError(f"unsupported Cursor hook event {name!r}")
    decision = decide(targets, base=base, workspace=workspace, state_path=state_path, command=command)
    return HookOutcome(json.dumps(cursor_response(decision)) + "\n", "", 0)


def _cursor_body(permission: str, msg: str) -> dict[str, Any]:
    # Current Cursor reads snake_case; early 1.7 builds read camelCase. Both are sent.
    return {
        "permission": permission,
        "user_message": msg,
        "agent_message": msg,
        "userMessage": msg,
        "agentMessage": msg,
    }


def cursor_response(decision: Decision) -> dict[str, Any]:
    if decision.allowed:
        return {"permission": "allow"}
    return _cursor_body("deny", decision.message())


def windsurf(event: Mapping[str, Any], *, workspace: Path | None, state_path: Path | None) -> HookOutcome:
    """Windsurf Cascade hooks (pre_write_code, pre_run_command, pre_mcp_tool_use): exit 2 blocks and
    shows stderr; exit 0 lets the action run. Windsurf cannot ask the person from a hook."""
    name = event.get("agent_action_name")
    info = _as_mapping(event.get("tool_info"))
    base = Path(str(info.get("cwd") or os.getcwd()))
    targets: list[Target | str] = []
    command = None
    if name == "pre_write_code":
        targets = list(_paths(info, ("file_path",)))
    elif name == "pre_run_command":
        command = str(info.get("command_line", ""))
        targets = list(shell_targets(command, base))
    elif name == "pre_mcp_tool_use":
        tool = str(info.get("mcp_tool_name", ""))
        is_ours = "trainsleuth" in str(info.get("mcp_server_name", ""))
        if MCP_WRITE_TOOL.search(tool) and not is_ours:
            targets = list(_paths(_as_mapping(info.get("mcp_tool_arguments")), MCP_PATH_FIELDS))
    elif not (isinstance(name, str) and name.startswith(("post_", "pre_read_code", "pre_user_prompt"))):
        raise ValueError(f"unsupported Windsurf hook event {name!r}")
    decision = decide(targets, base=base, workspace=workspace, state_path=state_path, command=command)
    if decision.allowed:
        return HookOutcome("", "", 0)
    return HookOutcome("", decision.message() + "\n", 2)


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
        if client == "windsurf":
            return windsurf(event, workspace=workspace, state_path=state_path)
        raise ValueError(f"unknown client {client!r}")
    except Exception as exc:  # fail closed on the gate's own errors
        reason = (
            f"trainsleuth edit gate could not decide ({type(exc).__name__}: {exc}); the call is denied "
            "because the gate fails closed. Check the hook input and `trainsleuth hook --help`, or remove "
            "the hook from the client's settings to edit without the gate"
        )
        if client == "cursor":
            return HookOutcome(json.dumps(_cursor_body("deny", reason)) + "\n", reason + "\n", 2)
        # Claude Code and Windsurf: exit code 2 blocks the call and shows stderr.
        return HookOutcome("", reason + "\n", 2)

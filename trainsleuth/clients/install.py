"""Register trainsleuth with MCP clients: each client's own config file, format and location.

Every installer reads the existing file (JSON, or JSON with comments for VS Code), adds or
updates only the `trainsleuth` entry (and, with hooks, only trainsleuth's own hook entries),
keeps everything else, writes a timestamped backup of the old file, and writes atomically
(`config_files.py`).
Running it twice changes nothing the second time. The launcher is written as an absolute path
because GUI applications start servers with a minimal PATH.

The operating system, the home folder and the environment are injectable (`Platform`) so the
layouts of macOS, Linux and Windows are tested on any machine.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Any, Literal

from trainsleuth.clients.config_files import InstallError as InstallError  # re-exported
from trainsleuth.clients.config_files import (
    atomic_write,
    backup_path,
    dump_json,
    has_comments,
    read_json_object,
    section,
)
from trainsleuth.clients.install_server import (
    InstallServerError,
    check_pythons,
    http_entry,
    http_token,
    tracked_by_git,
)

OsName = Literal["macos", "linux", "windows"]
Scope = Literal["project", "user"]

SERVER_NAME = "trainsleuth"
CLIENTS = ("claude-desktop", "claude-code", "cursor", "vscode", "windsurf")
HOOK_CLIENTS = ("claude-code", "cursor", "windsurf")

# Tools whose calls the edit gate inspects (see trainsleuth/clients/hooks.py).
CLAUDE_CODE_HOOK_MATCHER = "Edit|Write|MultiEdit|NotebookEdit|Bash|mcp__.*"
CURSOR_EDIT_MATCHER = "Write|Edit|StrReplace|MultiEdit|Delete|NotebookEdit|EditNotebook"


@dataclass(frozen=True)
class Platform:
    """Where the client configs live: OS, home folder and environment (injectable for tests)."""

    os: OsName
    home: Path
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def current(cls) -> Platform:
        name: OsName = "linux"
        if sys.platform == "darwin":
            name = "macos"
        elif sys.platform.startswith("win"):
            name = "windows"
        return cls(name, Path.home(), dict(os.environ))

    @property
    def appdata(self) -> Path:
        """%APPDATA% on Windows (default: HOME/AppData/Roaming)."""
        value = self.env.get("APPDATA")
        return Path(value) if value else self.home / "AppData" / "Roaming"

    @property
    def xdg_config(self) -> Path:
        value = self.env.get("XDG_CONFIG_HOME")
        return Path(value) if value else self.home / ".config"

    def app_config_dir(self, mac_and_windows_name: str, linux_name: str | None = None) -> Path:
        """The per-user application-data folder of a desktop app on this OS."""
        if self.os == "macos":
            return self.home / "Library" / "Application Support" / mac_and_windows_name
        if self.os == "windows":
            return self.appdata / mac_and_windows_name
        return self.xdg_config / (linux_name or mac_and_windows_name)


@dataclass
class Launcher:
    """How a client starts the server: an absolute command plus leading arguments."""

    command: str
    prefix_args: list[str] = field(default_factory=list)

    @classmethod
    def detect(cls, os_name: OsName | None = None) -> Launcher:
        """The `trainsleuth` console script next to this interpreter, else `python -m trainsleuth`."""
        bindir = Path(sys.executable).parent
        windows = (os_name or ("windows" if sys.platform.startswith("win") else "linux")) == "windows"
        for name in ("trainsleuth.exe", "trainsleuth") if windows else ("trainsleuth",):
            candidate = bindir / name
            if candidate.is_file():
                return cls(str(candidate.absolute()))
        return cls(str(Path(sys.executable).absolute()), ["-m", "trainsleuth"])

    def argv(self, *args: str) -> list[str]:
        return [self.command, *self.prefix_args, *args]

    def shell_command(self, os_name: OsName, *args: str) -> str:
        """One command line for hook configs (which take a string, run by a shell)."""
        argv = self.argv(*args)
        if os_name == "windows":
            return " ".join(f'"{a}"' if (" " in a or not a) else a for a in argv)
        return " ".join(shlex.quote(a) for a in argv)


@dataclass
class FileChange:
    """One config file the installer would write (or leaves as it is)."""

    path: Path
    new_text: str
    old_text: str | None
    what: str
    private: bool = False  # holds a secret: written (and backed up) readable by the owner only

    @property
    def changed(self) -> bool:
        return self.old_text != self.new_text


@dataclass
class InstallPlan:
    client: str
    scope: Scope
    changes: list[FileChange]
    notes: list[str] = field(default_factory=list)


@dataclass
class InstallResult:
    plan: InstallPlan
    written: list[Path]
    backups: list[Path]
    unchanged: list[Path]


# ------------------------------------------------------------------------------------------ clients


@dataclass(frozen=True)
class ClientSpec:
    name: str
    title: str
    scopes: tuple[Scope, ...]
    default_scope: Scope
    servers_key: str  # "mcpServers" or "servers" (VS Code)
    config_path: Callable[[Platform, Scope, Path], Path]
    entry: Callable[[Launcher, list[str]], dict[str, Any]]
    allow_comments: bool = False


def _stdio_entry(launcher: Launcher, args: list[str]) -> dict[str, Any]:
    return {"command": launcher.command, "args": [*launcher.prefix_args, *args], "env": {}}


def _typed_stdio_entry(launcher: Launcher, args: list[str]) -> dict[str, Any]:
    return {"type": "stdio", "command": launcher.command, "args": [*launcher.prefix_args, *args], "env": {}}


def _claude_desktop_path(p: Platform, scope: Scope, project: Path) -> Path:
    return p.app_config_dir("Claude") / "claude_desktop_config.json"


def _claude_code_path(p: Platform, scope: Scope, project: Path) -> Path:
    return project / ".mcp.json" if scope == "project" else p.home / ".claude.json"


def _cursor_path(p: Platform, scope: Scope, project: Path) -> Path:
    return (project if scope == "project" else p.home) / ".cursor" / "mcp.json"


def _vscode_path(p: Platform, scope: Scope, project: Path) -> Path:
    if scope == "project":
        return project / ".vscode" / "mcp.json"
    return p.app_config_dir("Code") / "User" / "mcp.json"


def _windsurf_path(p: Platform, scope: Scope, project: Path) -> Path:
    return p.home / ".codeium" / "windsurf" / "mcp_config.json"


SPECS: dict[str, ClientSpec] = {
    "claude-desktop": ClientSpec(
        "claude-desktop",
        "Claude Desktop",
        ("user",),
        "user",
        "mcpServers",
        _claude_desktop_path,
        _stdio_entry,
    ),
    "claude-code": ClientSpec(
        "claude-code",
        "Claude Code",
        ("project", "user"),
        "project",
        "mcpServers",
        _claude_code_path,
        _typed_stdio_entry,
    ),
    "cursor": ClientSpec(
        "cursor", "Cursor", ("project", "user"), "project", "mcpServers", _cursor_path, _stdio_entry
    ),
    "vscode": ClientSpec(
        "vscode",
        "VS Code",
        ("project", "user"),
        "project",
        "servers",
        _vscode_path,
        _typed_stdio_entry,
        allow_comments=True,
    ),
    "windsurf": ClientSpec(
        "windsurf", "Windsurf", ("user",), "user", "mcpServers", _windsurf_path, _stdio_entry
    ),
}


def hook_config_path(client: str, platform: Platform, scope: Scope, project: Path) -> Path:
    if client == "claude-code":
        return (project if scope == "project" else platform.home) / ".claude" / "settings.json"
    if client == "cursor":
        return (project if scope == "project" else platform.home) / ".cursor" / "hooks.json"
    if client == "windsurf":  # Cascade hooks; the user file, like Windsurf's MCP config
        return platform.home / ".codeium" / "windsurf" / "hooks.json"
    raise InstallError(f"{client} has no pre-tool hooks; --with-hooks works with: {', '.join(HOOK_CLIENTS)}")


def _is_our_hook(command: Any, client: str) -> bool:
    return isinstance(command, str) and "trainsleuth" in command and f"hook {client}" in command


def _merge_claude_code_hooks(settings: dict[str, Any], command: str, path: Path) -> None:
    hooks = section(settings, "hooks", path)
    groups = hooks.setdefault("PreToolUse", [])
    if not isinstance(groups, list):
        raise InstallError(f"{path}: hooks.PreToolUse is not a list; nothing was changed")
    ours = {
        "matcher": CLAUDE_CODE_HOOK_MATCHER,
        "hooks": [{"type": "command", "command": command, "timeout": 30}],
    }
    kept: list[Any] = []
    placed = False
    for group in groups:
        inner = group.get("hooks") if isinstance(group, dict) else None
        if isinstance(inner, list) and any(
            isinstance(h, dict) and _is_our_hook(h.get("command"), "claude-code") for h in inner
        ):
            others = [
                h
                for h in inner
                if not (isinstance(h, dict) and _is_our_hook(h.get("command"), "claude-code"))
            ]
            if others:  # someone else's hooks share the group: keep them in their own group
                kept.append({**group, "hooks": others})
            if not placed:
                kept.append(ours)
                placed = True
        else:
            kept.append(group)
    if not placed:
        kept.append(ours)
    hooks["PreToolUse"] = kept


def _merge_cursor_hooks(config: dict[str, Any], command: str, path: Path, *, edit_gate: bool) -> None:
    """trainsleuth's entries in Cursor's hooks.json, each `failClosed` (a crash or timeout blocks the call).

    `beforeMCPExecution` is always installed: it makes Cursor ask the person before approve_diagnosis.
    With the edit gate, `preToolUse` and `beforeShellExecution` are installed too.
    """
    config.setdefault("version", 1)
    hooks = section(config, "hooks", path)
    wanted: dict[str, dict[str, Any]] = {
        "beforeMCPExecution": {"type": "command", "command": command, "timeout": 30, "failClosed": True},
    }
    if edit_gate:
        wanted["preToolUse"] = {
            "type": "command", "command": command, "matcher": CURSOR_EDIT_MATCHER, "timeout": 30, "failClosed": True,
        }  # fmt: skip
        wanted["beforeShellExecution"] = {
            "type": "command",
            "command": command,
            "timeout": 30,
            "failClosed": True,
        }
    for event, ours in wanted.items():
        entries = hooks.setdefault(event, [])
        if not isinstance(entries, list):
            raise InstallError(f"{path}: hooks.{event} is not a list; nothing was changed")
        kept: list[Any] = []
        placed = False
        for entry in entries:
            if isinstance(entry, dict) and _is_our_hook(entry.get("command"), "cursor"):
                if not placed:
                    kept.append(ours)
                    placed = True
            else:
                kept.append(entry)
        if not placed:
            kept.append(ours)
        hooks[event] = kept


def _merge_windsurf_hooks(config: dict[str, Any], command: str, path: Path) -> None:
    """trainsleuth's entries in Windsurf's Cascade hooks.json (`show_output` so a denial is visible)."""
    hooks = section(config, "hooks", path)
    for event in ("pre_write_code", "pre_run_command", "pre_mcp_tool_use"):
        entries = hooks.setdefault(event, [])
        if not isinstance(entries, list):
            raise InstallError(f"{path}: hooks.{event} is not a list; nothing was changed")
        kept = [
            e for e in entries if not (isinstance(e, dict) and _is_our_hook(e.get("command"), "windsurf"))
        ]
        hooks[event] = [*kept, {"command": command, "show_output": True}]


def server_args(
    client: str, scope: Scope, workspaces: list[Path], pythons: list[Path] | None = None
) -> list[str]:
    args = ["serve"]
    if workspaces:
        for ws in workspaces:
            args += ["--workspace", str(ws)]
    elif client == "vscode" and scope == "project":
        args += ["--workspace", "${workspaceFolder}"]
    for python in pythons or []:
        args += ["--allow-python", str(python)]
    return args


def plan_install(
    client: str,
    *,
    scope: Scope | None = None,
    project: Path | None = None,
    workspaces: list[Path] | None = None,
    with_hooks: bool = False,
    platform: Platform | None = None,
    launcher: Launcher | None = None,
    pythons: list[Path] | None = None,
    url: str | None = None,
    token_file: Path | None = None,
) -> InstallPlan:
    """Work out every file change without touching the disk."""
    try:
        return _plan_install(
            client, scope=scope, project=project, workspaces=workspaces, with_hooks=with_hooks,
            platform=platform, launcher=launcher, pythons=pythons, url=url, token_file=token_file,
        )  # fmt: skip
    except InstallServerError as exc:
        raise InstallError(str(exc)) from None


def _plan_install(
    client: str,
    *,
    scope: Scope | None,
    project: Path | None,
    workspaces: list[Path] | None,
    with_hooks: bool,
    platform: Platform | None,
    launcher: Launcher | None,
    pythons: list[Path] | None,
    url: str | None,
    token_file: Path | None,
) -> InstallPlan:
    from trainsleuth.clients.approval import (
        ApprovalConfigError,
        enforcement_note,
        merge_claude_code_permissions,
        merge_vscode_settings,
        vscode_settings_path,
    )

    if client not in SPECS:
        raise InstallError(f"unknown client {client!r}; choose one of: {', '.join(CLIENTS)}")
    spec = SPECS[client]
    platform = platform or Platform.current()
    launcher = launcher or Launcher.detect(platform.os)
    chosen: Scope = scope or spec.default_scope
    if chosen not in spec.scopes:
        raise InstallError(
            f"{spec.title} has only {'/'.join(spec.scopes)} configuration; drop --scope {chosen} "
            f"(its config lives in {spec.config_path(platform, spec.default_scope, project or Path.cwd())})"
        )
    if with_hooks and client not in HOOK_CLIENTS:
        raise InstallError(
            f"{spec.title} has no pre-tool hooks; --with-hooks works with: {', '.join(HOOK_CLIENTS)}"
        )
    if url and client == "claude-desktop":
        raise InstallError(
            "Claude Desktop's config file only starts local (stdio) servers; drop --url to install the stdio "
            "server (remote servers are added in its Settings > Connectors)"
        )
    if url and pythons:
        raise InstallError("--python applies to a server the client starts; with --url, pass "
                           "--allow-python to `trainsleuth serve` instead")  # fmt: skip
    project = (project or Path.cwd()).absolute()
    notes: list[str] = []
    ws = [Path(w).expanduser().absolute() for w in (workspaces or [])]
    if not ws and (chosen == "project" and client != "vscode"):
        ws = [project]
    if not ws and client in ("claude-desktop", "windsurf") and not url:
        ws = [project]
        notes.append(
            f"{spec.title} starts servers from its own folder, so the workspace is set to {project}; "
            "pass --workspace PATH to choose another"
        )
    files: dict[Path, tuple[dict[str, Any], str | None, list[str]]] = {}

    def load(path: Path, what: str, allow_comments: bool = False) -> dict[str, Any]:
        if path not in files:
            data, old = read_json_object(path, allow_comments=allow_comments)
            if old is not None and allow_comments and has_comments(old):
                notes.append(f"{path} has comments, which JSON cannot keep: they stay in the backup copy")
            files[path] = (data, old, [])
        files[path][2].append(what)
        return files[path][0]

    path = spec.config_path(platform, chosen, project)
    servers = section(
        load(path, f"{spec.title} MCP servers ({chosen})", spec.allow_comments), spec.servers_key, path
    )
    private: set[Path] = set()
    if url:
        if chosen == "project" and tracked_by_git(path):
            raise InstallError(
                f"{path} would hold the server's token and is not git-ignored, so it could be committed: use "
                f"--scope user, or add {path.name} to .gitignore first; nothing was changed"
            )
        servers[SERVER_NAME] = http_entry(client, url, http_token(url, token_file))
        private.add(path)
        notes.append(f"{path} holds the server's bearer token: it is written readable by you only")
    else:
        servers[SERVER_NAME] = spec.entry(
            launcher, server_args(client, chosen, ws, check_pythons(pythons or []))
        )
    try:
        approval_path: Path | None = None
        if client == "claude-code":
            approval_path = hook_config_path(client, platform, chosen, project)
            merge_claude_code_permissions(
                load(approval_path, f"{spec.title} settings ({chosen})"), approval_path
            )
        elif client == "vscode":
            approval_path = vscode_settings_path(project, platform.app_config_dir("Code") / "User", chosen)
            merge_vscode_settings(
                load(approval_path, f"{spec.title} settings ({chosen})", True), approval_path
            )
        elif client == "cursor":
            approval_path = hook_config_path(client, platform, chosen, project)
    except ApprovalConfigError as exc:
        raise InstallError(str(exc)) from None
    if client in HOOK_CLIENTS and (with_hooks or client == "cursor"):
        hpath = hook_config_path(client, platform, chosen, project)
        hdata = load(hpath, f"{spec.title} hooks ({chosen})")
        command = launcher.shell_command(platform.os, "hook", client)
        if client == "claude-code":
            # Claude Code lets a call through when a hook fails with any code but 2: `|| exit 2` makes a
            # missing or crashing gate block the call instead (fail closed).
            _merge_claude_code_hooks(hdata, f"{command} || exit 2", hpath)
        elif client == "windsurf":
            _merge_windsurf_hooks(hdata, f"{command} || exit 2", hpath)  # same exit-code rule as Claude Code
        else:
            _merge_cursor_hooks(hdata, command, hpath, edit_gate=with_hooks)
    notes.append(enforcement_note(client, approval_path))
    changes = [
        FileChange(p, dump_json(data), old, " + ".join(dict.fromkeys(what)), private=p in private)
        for p, (data, old, what) in files.items()
    ]
    return InstallPlan(client, chosen, changes, notes)


def apply_plan(plan: InstallPlan) -> InstallResult:
    written: list[Path] = []
    backups: list[Path] = []
    unchanged: list[Path] = []
    for change in plan.changes:
        if not change.changed:
            unchanged.append(change.path)
            continue
        try:
            if change.old_text is not None:
                backup = backup_path(change.path)
                backup.write_text(change.old_text, encoding="utf-8")
                # The backup may hold what the original held (a token): same permissions as the original.
                os.chmod(backup, change.path.stat().st_mode & 0o777)
                backups.append(backup)
            atomic_write(change.path, change.new_text, change.private)
        except OSError as exc:
            raise InstallError(f"cannot write {change.path}: {exc}") from exc
        written.append(change.path)
    return InstallResult(plan, written, backups, unchanged)


def display_path(path: Path | PurePath, platform: Platform) -> str:
    if platform.os == "windows":
        return str(PureWindowsPath(path))
    return str(PurePosixPath(path))

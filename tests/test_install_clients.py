"""Installers against temporary HOME folders: each client, each OS layout, merging, backups, idempotence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainsleuth.clients.install import (
    InstallError,
    Launcher,
    Platform,
    apply_plan,
    plan_install,
)

TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")
LAUNCHER = Launcher("/opt/ts venv/bin/trainsleuth")


def _platform(os_name: str, tmp_path: Path) -> Platform:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {"APPDATA": str(home / "AppData" / "Roaming")} if os_name == "windows" else {}
    return Platform(os_name, home, env)  # type: ignore[arg-type]


EXPECTED = {
    ("claude-desktop", "user", "macos"): "home/Library/Application Support/Claude/claude_desktop_config.json",
    ("claude-desktop", "user", "linux"): "home/.config/Claude/claude_desktop_config.json",
    ("claude-desktop", "user", "windows"): "home/AppData/Roaming/Claude/claude_desktop_config.json",
    ("claude-code", "project", "macos"): "proj/.mcp.json",
    ("claude-code", "project", "linux"): "proj/.mcp.json",
    ("claude-code", "project", "windows"): "proj/.mcp.json",
    ("claude-code", "user", "macos"): "home/.claude.json",
    ("claude-code", "user", "linux"): "home/.claude.json",
    ("claude-code", "user", "windows"): "home/.claude.json",
    ("cursor", "project", "linux"): "proj/.cursor/mcp.json",
    ("cursor", "user", "macos"): "home/.cursor/mcp.json",
    ("cursor", "user", "windows"): "home/.cursor/mcp.json",
    ("vscode", "project", "linux"): "proj/.vscode/mcp.json",
    ("vscode", "user", "macos"): "home/Library/Application Support/Code/User/mcp.json",
    ("vscode", "user", "linux"): "home/.config/Code/User/mcp.json",
    ("vscode", "user", "windows"): "home/AppData/Roaming/Code/User/mcp.json",
    ("windsurf", "user", "macos"): "home/.codeium/windsurf/mcp_config.json",
    ("windsurf", "user", "linux"): "home/.codeium/windsurf/mcp_config.json",
    ("windsurf", "user", "windows"): "home/.codeium/windsurf/mcp_config.json",
}


APPROVAL_FILES = {
    "claude-code": {"project": "proj/.claude/settings.json", "user": "home/.claude/settings.json"},
    "cursor": {"project": "proj/.cursor/hooks.json", "user": "home/.cursor/hooks.json"},
    "vscode": {"project": "proj/.vscode/settings.json", "user": ""},
}
APPROVAL_CHECK = {
    "claude-code": lambda d: d["permissions"]["ask"] == ["mcp__trainsleuth__approve_diagnosis"],
    "cursor": lambda d: (
        list(d["hooks"]) == ["beforeMCPExecution"] and d["hooks"]["beforeMCPExecution"][0]["failClosed"]
    ),
    "vscode": lambda d: d["chat.tools.eligibleForAutoApproval"] == {"trainsleuth/approve_diagnosis": False},
}


@pytest.mark.parametrize(("client", "scope", "os_name"), sorted(EXPECTED))
def test_fresh_install_writes_the_clients_own_file(
    tmp_path: Path, client: str, scope: str, os_name: str
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    plan = plan_install(
        client,
        scope=scope,
        project=project,
        platform=_platform(os_name, tmp_path),
        launcher=LAUNCHER,  # type: ignore[arg-type]
    )
    result = apply_plan(plan)
    target = tmp_path / EXPECTED[(client, scope, os_name)]
    assert result.written[0] == target
    assert result.backups == []
    # Clients with a per-tool permission setting are told to ask before approve_diagnosis.
    if client in APPROVAL_FILES:
        approval = (
            tmp_path / APPROVAL_FILES[client][scope if os_name == "linux" or scope == "project" else "user"]
        )
        if client == "vscode" and scope == "user":
            approval = target.parent / "settings.json"
        assert result.written[1:] == [approval], result.written
        assert APPROVAL_CHECK[client](json.loads(approval.read_text()))
    else:
        assert result.written == [target]
    data = json.loads(target.read_text())
    key = "servers" if client == "vscode" else "mcpServers"
    entry = data[key]["trainsleuth"]
    # Absolute launcher, never a bare name found on PATH.
    assert entry["command"] == "/opt/ts venv/bin/trainsleuth"
    assert entry["args"][0] == "serve"
    if client in ("claude-code", "vscode"):
        assert entry["type"] == "stdio"
    if client == "vscode" and scope == "project":
        assert entry["args"] == ["serve", "--workspace", "${workspaceFolder}"]
    elif client in ("claude-desktop", "windsurf") or scope == "project":
        assert entry["args"] == ["serve", "--workspace", str(project)]
    else:  # user scope of an editor: the server works in the folder the editor opened
        assert entry["args"] == ["serve"]


def test_merge_keeps_other_servers_and_keys_and_backs_up(tmp_path: Path) -> None:
    platform = _platform("macos", tmp_path)
    config = platform.home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    config.parent.mkdir(parents=True)
    original = {
        "globalShortcut": "Ctrl+Space",
        "mcpServers": {
            "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/x"]},
            "trainsleuth": {"command": "trainsleuth", "args": ["serve"]},  # stale, relative: replaced
        },
    }
    config.write_text(json.dumps(original, indent=4))
    ws = tmp_path / "work"
    ws.mkdir()
    plan = plan_install("claude-desktop", workspaces=[ws], platform=platform, launcher=LAUNCHER)
    result = apply_plan(plan)
    data = json.loads(config.read_text())
    assert data["globalShortcut"] == "Ctrl+Space"
    assert data["mcpServers"]["filesystem"] == original["mcpServers"]["filesystem"]
    assert data["mcpServers"]["trainsleuth"]["command"] == LAUNCHER.command
    assert data["mcpServers"]["trainsleuth"]["args"] == ["serve", "--workspace", str(ws)]
    assert list(data["mcpServers"]) == ["filesystem", "trainsleuth"]
    assert len(result.backups) == 1
    assert json.loads(result.backups[0].read_text()) == original

    # Idempotent: a second run writes nothing and makes no new backup.
    again = apply_plan(plan_install("claude-desktop", workspaces=[ws], platform=platform, launcher=LAUNCHER))
    assert again.written == [] and again.backups == [] and again.unchanged == [config]
    assert sorted(p.name for p in config.parent.iterdir()) == sorted([config.name, result.backups[0].name])


def test_claude_code_user_scope_keeps_the_rest_of_claude_json(tmp_path: Path) -> None:
    platform = _platform("linux", tmp_path)
    claude_json = platform.home / ".claude.json"
    state = {
        "numStartups": 12,
        "projects": {"/x": {"allowedTools": []}},
        "mcpServers": {"other": {"command": "o"}},
    }
    claude_json.write_text(json.dumps(state))
    apply_plan(plan_install("claude-code", scope="user", platform=platform, launcher=LAUNCHER))
    data = json.loads(claude_json.read_text())
    assert data["numStartups"] == 12 and data["projects"] == state["projects"]
    assert set(data["mcpServers"]) == {"other", "trainsleuth"}


def test_vscode_settings_with_comments_are_read(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".vscode").mkdir(parents=True)
    cfg = project / ".vscode" / "mcp.json"
    cfg.write_text(
        '{\n  // my servers\n  "servers": {\n    "git": {"type": "stdio", "command": "uvx", '
        '"args": ["mcp-server-git"]}, /* trailing */\n  },\n  "inputs": [],\n}\n'
    )
    result = apply_plan(
        plan_install("vscode", project=project, platform=_platform("linux", tmp_path), launcher=LAUNCHER)
    )
    data = json.loads(cfg.read_text())
    assert set(data["servers"]) == {"git", "trainsleuth"} and data["inputs"] == []
    assert "// my servers" in result.backups[0].read_text()


def test_invalid_config_is_refused_and_left_untouched(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    bad = project / ".mcp.json"
    bad.write_text('{"mcpServers": {"a": ')
    with pytest.raises(InstallError, match="not valid JSON"):
        plan_install("claude-code", project=project, platform=_platform("linux", tmp_path), launcher=LAUNCHER)
    assert bad.read_text() == '{"mcpServers": {"a": '
    bad.write_text('{"mcpServers": []}')
    with pytest.raises(InstallError, match="expected an object"):
        plan_install("claude-code", project=project, platform=_platform("linux", tmp_path), launcher=LAUNCHER)


def test_scope_and_hook_usage_errors(tmp_path: Path) -> None:
    platform = _platform("linux", tmp_path)
    with pytest.raises(InstallError, match="only user configuration"):
        plan_install("windsurf", scope="project", platform=platform, launcher=LAUNCHER)
    with pytest.raises(InstallError, match="no pre-tool hooks"):
        plan_install("vscode", with_hooks=True, project=tmp_path, platform=platform, launcher=LAUNCHER)
    with pytest.raises(InstallError, match="unknown client"):
        plan_install("emacs", platform=platform, launcher=LAUNCHER)


def test_claude_code_hooks_merge_with_existing_hooks(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    settings = project / ".claude" / "settings.json"
    mine = {"matcher": "Bash", "hooks": [{"type": "command", "command": "/usr/local/bin/audit"}]}
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash(ls)"]}, "hooks": {"PreToolUse": [mine]}}))
    platform = _platform("linux", tmp_path)
    apply_plan(
        plan_install("claude-code", project=project, with_hooks=True, platform=platform, launcher=LAUNCHER)
    )
    data = json.loads(settings.read_text())
    assert data["permissions"] == {"allow": ["Bash(ls)"], "ask": ["mcp__trainsleuth__approve_diagnosis"]}
    groups = data["hooks"]["PreToolUse"]
    assert groups[0] == mine
    assert groups[1]["matcher"] == "Edit|Write|MultiEdit|NotebookEdit|Bash|mcp__.*"
    assert groups[1]["hooks"][0]["type"] == "command"
    # The command is one shell string; the path with a space is quoted.
    # `|| exit 2`: a gate that cannot run blocks the call (Claude Code lets other exit codes through).
    assert groups[1]["hooks"][0]["command"] == "'/opt/ts venv/bin/trainsleuth' hook claude-code || exit 2"
    again = apply_plan(
        plan_install("claude-code", project=project, with_hooks=True, platform=platform, launcher=LAUNCHER)
    )
    assert again.written == []
    assert len(json.loads(settings.read_text())["hooks"]["PreToolUse"]) == 2
    # A newer launcher replaces trainsleuth's own hook, never adds a second one.
    moved = Launcher("/new/bin/trainsleuth")
    apply_plan(
        plan_install("claude-code", project=project, with_hooks=True, platform=platform, launcher=moved)
    )
    groups = json.loads(settings.read_text())["hooks"]["PreToolUse"]
    assert (
        len(groups) == 2
        and groups[1]["hooks"][0]["command"] == "/new/bin/trainsleuth hook claude-code || exit 2"
    )


def test_cursor_hooks_file(tmp_path: Path) -> None:
    platform = _platform("windows", tmp_path)
    hooks = platform.home / ".cursor" / "hooks.json"
    hooks.parent.mkdir(parents=True)
    hooks.write_text(json.dumps({"version": 1, "hooks": {"afterFileEdit": [{"command": "fmt"}]}}))
    launcher = Launcher(r"C:\Program Files\ts\Scripts\trainsleuth.exe")
    apply_plan(plan_install("cursor", scope="user", with_hooks=True, platform=platform, launcher=launcher))
    data = json.loads(hooks.read_text())
    assert data["version"] == 1
    assert data["hooks"]["afterFileEdit"] == [{"command": "fmt"}]
    expected_cmd = '"C:\\Program Files\\ts\\Scripts\\trainsleuth.exe" hook cursor'
    for event in ("preToolUse", "beforeShellExecution", "beforeMCPExecution"):
        (entry,) = data["hooks"][event]
        assert entry["command"] == expected_cmd
        assert entry["failClosed"] is True  # a crashed or timed-out gate blocks the call
    assert "Write" in data["hooks"]["preToolUse"][0]["matcher"]
    assert json.loads((platform.home / ".cursor" / "mcp.json").read_text())["mcpServers"]["trainsleuth"]


def _cli_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["HOME"] = str(home)
    env.pop("XDG_CONFIG_HOME", None)
    return env


def test_cli_dry_run_writes_nothing_and_real_run_uses_this_launcher(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = tmp_path / "proj"
    home.mkdir()
    project.mkdir()
    dry = subprocess.run(
        [TRAINSLEUTH, "install", "cursor", "--with-hooks", "--dry-run"],
        cwd=project, env=_cli_env(home), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert "would write" in dry.stdout and "dry run: nothing was written" in dry.stdout
    assert '"mcpServers"' in dry.stdout and '"beforeShellExecution"' in dry.stdout
    assert not (project / ".cursor").exists()
    real = subprocess.run(
        [TRAINSLEUTH, "install", "cursor"],
        cwd=project,
        env=_cli_env(home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert real.returncode == 0, real.stderr
    entry = json.loads((project / ".cursor" / "mcp.json").read_text())["mcpServers"]["trainsleuth"]
    assert Path(entry["command"]).is_absolute() and Path(entry["command"]).exists()
    bad = subprocess.run(
        [TRAINSLEUTH, "install", "vscode", "--with-hooks"], cwd=project, env=_cli_env(home),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "no pre-tool hooks" in bad.stderr


@pytest.mark.anyio
async def test_installed_entry_starts_a_working_server(tmp_path: Path) -> None:
    """What the client would launch (command + args exactly as written) answers MCP over stdio."""
    from mcp import Client, StdioServerParameters

    project = tmp_path / "proj"
    project.mkdir()
    apply_plan(plan_install("claude-code", project=project, platform=_platform("linux", tmp_path)))
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["trainsleuth"]
    # A GUI client's minimal PATH: the absolute launcher must not need PATH at all.
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env={"PATH": "/nonexistent"})
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert {"start_investigation", "analyze_training_log", "verify_fix"} <= names

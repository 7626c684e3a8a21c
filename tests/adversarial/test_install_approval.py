"""`trainsleuth install`: approval asks the person, hooks fail closed, the user's interpreter and HTTP.

Attacks: an assistant calls approve_diagnosis itself (an earlier "always allow" in the client); the
gate's hook crashes or is missing, so the client lets the call through; the server runs code with an
interpreter the assistant chose; a client config with the HTTP token gets committed.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hook_helpers import claude_event, make_workspace, open_investigation

from trainsleuth.clients.install import InstallError, Launcher, Platform, apply_plan, plan_install
from trainsleuth.server.tokens import TOKEN_DIR_ENV, ensure_token

TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")


def _platform(tmp_path: Path, env: dict[str, str] | None = None) -> Platform:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return Platform("linux", home, env or {})


def test_claude_code_asks_before_approval_and_keeps_the_users_settings(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    settings = project / ".claude" / "settings.json"
    before = {
        "model": "opus",
        "permissions": {"allow": ["Bash(ls)", "mcp__trainsleuth__approve_diagnosis"], "deny": ["Read(.env)"]},
    }
    settings.write_text(json.dumps(before))
    plan = plan_install("claude-code", project=project, with_hooks=True, platform=_platform(tmp_path))
    result = apply_plan(plan)
    data = json.loads(settings.read_text())
    assert data["model"] == "opus" and data["permissions"]["deny"] == ["Read(.env)"]
    assert data["permissions"]["ask"] == ["mcp__trainsleuth__approve_diagnosis"]
    # The earlier "always allow" of the approval tool is withdrawn; the rest of allow stays.
    assert data["permissions"]["allow"] == ["Bash(ls)"]
    assert (
        json.loads(next(b for b in result.backups if b.name.startswith("settings.json")).read_text())
        == before
    )
    assert any("asks you before every approve_diagnosis" in n for n in plan.notes)


def test_claude_code_hook_fails_closed(tmp_path: Path) -> None:
    """The installed hook command blocks (exit 2) when the gate is missing or crashes."""
    ws = make_workspace(tmp_path / "proj")
    iid = open_investigation(ws)
    apply_plan(plan_install("claude-code", project=ws, with_hooks=True, platform=_platform(tmp_path)))
    (group,) = [g for g in json.loads((ws / ".claude" / "settings.json").read_text())["hooks"]["PreToolUse"]]
    command = group["hooks"][0]["command"]
    assert command.endswith("|| exit 2")
    write = claude_event(ws, "Write", {"file_path": str(ws / "train.py"), "content": "x"})
    # Claude Code runs the command with a shell, the event on stdin.
    ran = subprocess.run(["sh", "-c", command], input=write, capture_output=True, text=True, timeout=60)
    assert (
        ran.returncode == 0
        and iid in json.loads(ran.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    )
    broken = command.replace(TRAINSLEUTH, str(tmp_path / "uninstalled" / "trainsleuth"))
    assert broken != command
    ran = subprocess.run(["sh", "-c", broken], input=write, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 2  # Claude Code blocks the call on exit 2; other codes would let it through
    crashed = subprocess.run(
        ["sh", "-c", command], input="{not json", capture_output=True, text=True, timeout=60
    )
    assert crashed.returncode == 2 and "fails closed" in crashed.stderr


def test_cursor_hooks_fail_closed_and_ask_before_approval(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    platform = _platform(tmp_path)
    apply_plan(
        plan_install("cursor", project=project, platform=platform, launcher=Launcher("/x/trainsleuth"))
    )
    hooks = json.loads((project / ".cursor" / "hooks.json").read_text())["hooks"]
    assert list(hooks) == ["beforeMCPExecution"]  # approval asks even without the edit gate
    apply_plan(
        plan_install(
            "cursor", project=project, with_hooks=True, platform=platform, launcher=Launcher("/x/trainsleuth")
        )
    )
    hooks = json.loads((project / ".cursor" / "hooks.json").read_text())["hooks"]
    assert sorted(hooks) == ["beforeMCPExecution", "beforeShellExecution", "preToolUse"]
    assert all(entry["failClosed"] is True for entries in hooks.values() for entry in entries)
    assert all(len(entries) == 1 for entries in hooks.values())


def test_vscode_never_auto_approves_the_approval_tool(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".vscode").mkdir(parents=True)
    settings = project / ".vscode" / "settings.json"
    settings.write_text(
        '{\n  // editor settings\n  "editor.tabSize": 2,\n  "chat.tools.eligibleForAutoApproval": {"fetch": false},\n}\n'
    )
    plan = plan_install("vscode", project=project, platform=_platform(tmp_path))
    result = apply_plan(plan)
    data = json.loads(settings.read_text())
    assert data["editor.tabSize"] == 2
    assert data["chat.tools.eligibleForAutoApproval"] == {
        "fetch": False,
        "trainsleuth/approve_diagnosis": False,
    }
    assert any("comments" in n and "backup" in n for n in plan.notes)
    assert any("// editor settings" in b.read_text() for b in result.backups)


@pytest.mark.parametrize("client", ["windsurf", "claude-desktop"])
def test_clients_that_cannot_enforce_say_so(tmp_path: Path, client: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    env.pop("XDG_CONFIG_HOME", None)
    ran = subprocess.run(
        [TRAINSLEUTH, "install", client, "--workspace", str(tmp_path)],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "cannot enforce" in ran.stdout or "no file setting for per-tool permission" in ran.stdout


@pytest.mark.anyio
async def test_python_option_allows_that_interpreter_in_the_started_server(tmp_path: Path) -> None:
    """`install --python` records the interpreter; the server the client starts uses it, refuses others."""
    from mcp import Client, StdioServerParameters

    project = tmp_path / "proj"
    project.mkdir()
    theirs = tmp_path / "conda-like" / "envs" / "ml"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(theirs)], check=True)
    other = tmp_path / "other-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    python = theirs / "bin" / "python"
    apply_plan(plan_install("claude-code", project=project, platform=_platform(tmp_path), pythons=[python]))
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["trainsleuth"]
    assert entry["args"][-2:] == ["--allow-python", str(python)]
    env = {k: v for k, v in os.environ.items() if k not in ("CONDA_PREFIX", "VIRTUAL_ENV")}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env)
    async with Client(params) as client:
        ok = await client.call_tool("environment_report", {"python": str(python), "import_torch": False})
        assert not ok.is_error, ok.content
        refused = await client.call_tool("environment_report", {"python": str(other / "bin" / "python")})
        assert refused.is_error
        text = refused.content[0].text
        assert f"trainsleuth install CLIENT --python {other / 'bin' / 'python'}" in text
        assert f"trainsleuth serve --allow-python {other / 'bin' / 'python'}" in text
    with pytest.raises(InstallError, match="not an executable file"):
        plan_install(
            "claude-code", project=project, platform=_platform(tmp_path), pythons=[tmp_path / "nope"]
        )


def test_http_install_finds_the_token_and_keeps_it_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens = tmp_path / "tokens"
    token, _, _ = ensure_token("127.0.0.1", 8765, {TOKEN_DIR_ENV: str(tokens)})
    with monkeypatch.context() as m:
        m.setenv(TOKEN_DIR_ENV, str(tokens))
        project = tmp_path / "proj"
        project.mkdir()
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        url = "http://localhost:8765/mcp"
        platform = _platform(tmp_path)
        # A project config could be committed: refused until it is git-ignored.
        with pytest.raises(InstallError, match="could be committed"):
            plan_install("claude-code", project=project, platform=platform, url=url)
        assert not (project / ".mcp.json").exists()
        (project / ".gitignore").write_text(".mcp.json\n")
        apply_plan(plan_install("claude-code", project=project, platform=platform, url=url))
        cfg = project / ".mcp.json"
        entry = json.loads(cfg.read_text())["mcpServers"]["trainsleuth"]
        assert entry == {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}
        assert stat.S_IMODE(cfg.stat().st_mode) == 0o600
        apply_plan(plan_install("windsurf", platform=platform, url=url))
        windsurf = json.loads((platform.home / ".codeium" / "windsurf" / "mcp_config.json").read_text())
        assert windsurf["mcpServers"]["trainsleuth"]["serverUrl"] == url
        with pytest.raises(InstallError, match="no token for"):
            plan_install("cursor", scope="user", platform=platform, url="http://127.0.0.1:9999/mcp")
        with pytest.raises(InstallError, match="only starts local"):
            plan_install("claude-desktop", platform=platform, url=url)
    dry = subprocess.run(
        [TRAINSLEUTH, "install", "cursor", "--scope", "user", "--url", url, "--dry-run"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**os.environ, "HOME": str(tmp_path / "home"), TOKEN_DIR_ENV: str(tokens)},
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert token not in dry.stdout and "Bearer <the server's token>" in dry.stdout


def test_windsurf_hooks_fail_closed(tmp_path: Path) -> None:
    platform = _platform(tmp_path)
    hooks_file = platform.home / ".codeium" / "windsurf" / "hooks.json"
    hooks_file.parent.mkdir(parents=True)
    hooks_file.write_text(
        json.dumps({"hooks": {"post_write_code": [{"command": "fmt", "show_output": True}]}})
    )
    plan = plan_install("windsurf", with_hooks=True, workspaces=[tmp_path], platform=platform)
    apply_plan(plan)
    hooks = json.loads(hooks_file.read_text())["hooks"]
    assert hooks["post_write_code"] == [{"command": "fmt", "show_output": True}]
    for event in ("pre_write_code", "pre_run_command", "pre_mcp_tool_use"):
        (entry,) = hooks[event]
        assert entry["command"].endswith("hook windsurf || exit 2") and entry["show_output"] is True
    again = apply_plan(plan_install("windsurf", with_hooks=True, workspaces=[tmp_path], platform=platform))
    assert hooks_file not in again.written

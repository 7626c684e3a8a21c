"""Client-side approval: make each client ask the person before `approve_diagnosis` runs.

Approving a diagnosis is the person's decision. The server asks through elicitation where the
client supports it; `trainsleuth install` also sets the client's own permission for the tool to
"ask" where the client has such a setting, so an assistant cannot call it silently:

| client | setting written | enforced by |
|---|---|---|
| Claude Code | `permissions.ask: ["mcp__trainsleuth__approve_diagnosis"]` in `.claude/settings.json` | Claude Code (ask wins over allow) |
| VS Code | `"chat.tools.eligibleForAutoApproval": {"trainsleuth/approve_diagnosis": false}` in `settings.json` | VS Code (never auto-approved) |
| Cursor | a `beforeMCPExecution` hook (`failClosed`) that answers `permission: ask` | Cursor's hooks |
| Claude Desktop | none: no file setting for per-tool permission (it asks unless "Always allow" was chosen) | the person, and the server |
| Windsurf | none: its MCP config has no per-tool permission | the server only |

Each merge adds only trainsleuth's own keys and keeps everything else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

APPROVAL_TOOL = "approve_diagnosis"
CLAUDE_CODE_RULE = f"mcp__trainsleuth__{APPROVAL_TOOL}"
VSCODE_SETTING = "chat.tools.eligibleForAutoApproval"
VSCODE_TOOL = f"trainsleuth/{APPROVAL_TOOL}"


class ApprovalConfigError(Exception):
    """A client config has a shape the merge cannot extend; nothing is changed."""


def merge_claude_code_permissions(settings: dict[str, Any], path: Path) -> None:
    """Add `mcp__trainsleuth__approve_diagnosis` to `permissions.ask` (ask wins over any allow rule)."""
    permissions = settings.setdefault("permissions", {})
    if not isinstance(permissions, dict):
        raise ApprovalConfigError(f"{path}: 'permissions' is not an object; nothing was changed")
    ask = permissions.setdefault("ask", [])
    if not isinstance(ask, list):
        raise ApprovalConfigError(f"{path}: permissions.ask is not a list; nothing was changed")
    if CLAUDE_CODE_RULE not in ask:
        ask.append(CLAUDE_CODE_RULE)
    allow = permissions.get("allow")
    if isinstance(allow, list) and CLAUDE_CODE_RULE in allow:
        allow.remove(CLAUDE_CODE_RULE)  # an "always allow" given earlier would let the assistant approve


def merge_vscode_settings(settings: dict[str, Any], path: Path) -> None:
    """Mark `trainsleuth/approve_diagnosis` as never eligible for auto-approval."""
    eligible = settings.setdefault(VSCODE_SETTING, {})
    if not isinstance(eligible, dict):
        raise ApprovalConfigError(f"{path}: '{VSCODE_SETTING}' is not an object; nothing was changed")
    eligible[VSCODE_TOOL] = False


def vscode_settings_path(project: Path, user_dir: Path, scope: str) -> Path:
    """VS Code's settings.json beside the MCP config: the workspace's or the user profile's."""
    return project / ".vscode" / "settings.json" if scope == "project" else user_dir / "settings.json"


ENFORCEMENT = {
    "claude-code": "Claude Code asks you before every approve_diagnosis call (permissions.ask in {path}).",
    "vscode": "VS Code always asks you to confirm approve_diagnosis ({setting} in {path}).",
    "cursor": "Cursor's hook asks you before every approve_diagnosis call (beforeMCPExecution in {path}, "
    "failClosed).",
    "claude-desktop": "Claude Desktop has no file setting for per-tool permission: it asks before a tool "
    "call unless you chose 'Always allow' for approve_diagnosis, so keep that tool on ask. trainsleuth "
    "cannot enforce it from here; the approval dialog (elicitation) and the server's own check still apply.",
    "windsurf": "Windsurf cannot be told to ask before approve_diagnosis (its MCP config has no per-tool "
    "permission and its hooks cannot ask; "
    "they only block): trainsleuth cannot enforce client-side approval there; only the server's own check applies.",
}


def enforcement_note(client: str, path: Path | None) -> str:
    return ENFORCEMENT[client].format(path=path, setting=VSCODE_SETTING)

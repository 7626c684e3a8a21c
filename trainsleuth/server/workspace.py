"""Workspace policy: every path a tool touches must resolve inside a configured workspace.

Modelled on the reference git MCP server: resolve first (symlinks included), then check
containment; refuse null bytes, `..` escapes, absolute paths elsewhere, and strings that git
would read as options.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


class PolicyError(Exception):
    """A path or argument was refused by the workspace policy; `next_step` says what to pass instead."""

    def __init__(self, message: str, next_step: str | None = None) -> None:
        super().__init__(message)
        self.next_step = next_step


class WorkspacePolicy:
    def __init__(self, workspaces: Sequence[Path]) -> None:
        if not workspaces:
            raise ValueError("at least one workspace is required")
        resolved: list[Path] = []
        for ws in workspaces:
            path = Path(ws).expanduser()
            if not path.is_dir():
                raise ValueError(f"workspace {str(ws)!r} is not an existing directory")
            resolved.append(path.resolve())
        self.workspaces = resolved

    @property
    def primary(self) -> Path:
        return self.workspaces[0]

    def contains(self, path: Path) -> bool:
        return any(path == ws or path.is_relative_to(ws) for ws in self.workspaces)

    def resolve(self, raw: str, *, field: str = "path", must_exist: bool = False) -> Path:
        """Return the real absolute path for `raw`, or raise PolicyError saying why it is refused."""
        if not isinstance(raw, str) or raw == "":
            raise PolicyError(f"{field}: an empty path was given")
        if "\x00" in raw:
            raise PolicyError(f"{field}: the path contains a null byte")
        candidate = Path(os.path.expanduser(raw))
        if not candidate.is_absolute():
            candidate = self.primary / candidate
        # strict=False resolves every symlink that exists, so a link pointing outside is caught.
        real = candidate.resolve(strict=False)
        if not self.contains(real):
            where = ", ".join(str(ws) for ws in self.workspaces)
            reason = "it resolves through a symlink to" if _has_symlink(candidate) else "it resolves to"
            raise PolicyError(
                f"{field}: {raw!r} is outside the workspace ({where}); {reason} {real}. "
                "Pass a path inside the workspace, or start the server with --workspace for that folder"
            )
        if must_exist and not real.exists():
            raise PolicyError(f"{field}: {raw!r} does not exist (resolved to {real})")
        return real


def _has_symlink(path: Path) -> bool:
    current = Path(path.anchor)
    for part in path.parts[1:]:
        current = current / part
        if current.is_symlink():
            return True
    return False


def check_ref(value: str, *, field: str = "ref") -> str:
    """A string later passed to git as a ref or option may not begin with '-' (option injection)."""
    if not isinstance(value, str) or not value.strip():
        raise PolicyError(f"{field}: an empty value was given")
    if value.startswith("-"):
        raise PolicyError(f"{field}: {value!r} begins with '-', which git would read as an option; refused")
    if "\x00" in value:
        raise PolicyError(f"{field}: the value contains a null byte")
    return value

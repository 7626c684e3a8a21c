"""Workspace policy: every path a tool touches must resolve inside a configured workspace.

Modelled on the reference git MCP server: resolve first (symlinks included), then check
containment; refuse null bytes, `..` escapes, absolute paths elsewhere, and strings that git
would read as options.

One exception, for inputs a tool only *reads* (a log the user names, a folder of wheels, a
checkpoint): such a path may lie outside the workspaces (`resolve_read`). It is read, never
written or executed where it is, and the result says so. Places where credentials and system
state live are refused even then: `/proc`, `/sys`, `/dev`, `/etc`, `/run`, `/var/lib`, ...,
dot-folders of the home directory (`~/.ssh`, `~/.aws`, `~/.config`, ...), folders and files
named like keys or secrets, and anything that is not a regular file or folder. A server
started with `outside_reads=False` (`TRAINSLEUTH_OUTSIDE_READS=0` in its environment) refuses them all.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path

_SYSTEM_ROOTS = (
    "/proc", "/sys", "/dev", "/etc", "/boot", "/run", "/var/run", "/var/lib", "/var/spool", "/var/mail",
    "/var/db", "/private/etc",
)  # fmt: skip
_SECRET_PARTS = {
    ".ssh", ".gnupg", ".aws", ".azure", ".gcloud", ".kube", ".docker", ".password-store", ".netrc",
    ".git-credentials", ".pypirc", ".npmrc", "keychains",
}  # fmt: skip
_SECRET_FILE = re.compile(
    r"^(\.env(\..*)?|id_[a-z0-9_]+(\.pub)?|.*\.(pem|key|p12|pfx|kdbx|keychain)|credentials(\.json)?"
    r"|.*_history|\.?htpasswd|shadow|passwd)$",
    re.IGNORECASE,
)


class PolicyError(Exception):
    """A path or argument was refused by the workspace policy; `next_step` says what to pass instead."""

    def __init__(self, message: str, next_step: str | None = None) -> None:
        super().__init__(message)
        self.next_step = next_step


def _missing(field: str, raw: str, real: Path) -> PolicyError:
    """A path that does not exist: say so, and show what the nearest existing folder holds."""
    folder = real.parent
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    try:
        names = sorted(
            p.name + ("/" if p.is_dir() else "") for p in folder.iterdir() if not p.name.startswith(".")
        )
    except OSError:
        names = []
    shown = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
    return PolicyError(
        f"{field}: {raw!r} does not exist (resolved to {real})",
        f"pass an existing file or folder as {field} (relative to the workspace, or absolute); "
        f"{folder} holds: {shown or 'nothing'}",
    )


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
        real, candidate = self._real(raw, field)
        if not self.contains(real):
            raise self._outside(raw, real, candidate, field)
        if must_exist and not real.exists():
            raise _missing(field, raw, real)
        return real

    def resolve_read(
        self, raw: str, *, field: str = "path", must_exist: bool = True, outside_reads: bool = True
    ) -> tuple[Path, bool]:
        """Resolve an input the tool only reads: (path, True) when it lies outside the workspaces.

        Outside a workspace it must exist, be a regular file or folder, and not be a place where
        credentials or system state live (see the module docstring).
        """
        real, candidate = self._real(raw, field)
        if self.contains(real):
            if must_exist and not real.exists():
                raise _missing(field, raw, real)
            return real, False
        refusal = self._outside(raw, real, candidate, field)
        if not outside_reads:
            raise refusal
        why = sensitive_reason(real)
        if why is not None:
            raise PolicyError(
                f"{field}: {raw!r} is outside the workspace and refused even for reading: {why}",
                f"copy what the tool should read into the workspace, or add --workspace "
                f"{suggest_workspace(real)} to the server's command line",
            )
        try:
            mode = real.stat().st_mode
        except OSError:
            raise _missing(field, raw, real) from None
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise PolicyError(f"{field}: {real} is neither a regular file nor a folder; refused")
        return real, True

    def _real(self, raw: str, field: str) -> tuple[Path, Path]:
        if not isinstance(raw, str) or raw == "":
            raise PolicyError(f"{field}: an empty path was given")
        if "\x00" in raw:
            raise PolicyError(f"{field}: the path contains a null byte")
        candidate = Path(os.path.expanduser(raw))
        if not candidate.is_absolute():
            candidate = self.primary / candidate
        # strict=False resolves every symlink that exists, so a link pointing outside is caught.
        return candidate.resolve(strict=False), candidate

    def _outside(self, raw: str, real: Path, candidate: Path, field: str) -> PolicyError:
        where = ", ".join(str(ws) for ws in self.workspaces)
        reason = "it resolves through a symlink to" if _has_symlink(candidate) else "it resolves to"
        allow = suggest_workspace(real)
        return PolicyError(
            f"{field}: {raw!r} is outside the workspace ({where}); {reason} {real}. "
            f"A server started with --workspace {allow} would allow it",
            f"pass a path inside the workspace, or add --workspace {allow} to the server's command line "
            "(`trainsleuth serve --workspace ...`, repeatable; `trainsleuth client ... --workspace ...`)",
        )


def suggest_workspace(path: Path) -> Path:
    """The folder to add as a workspace so that `path` is allowed: its git repository, else its folder."""
    folder = path if path.is_dir() else path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    probe = folder
    home = Path.home()
    while probe != probe.parent and probe != home:
        if (probe / ".git").exists():
            return probe
        probe = probe.parent
    return folder


def sensitive_reason(path: Path) -> str | None:
    """Why `path` is never read from outside a workspace, or None when it may be."""
    for root in _SYSTEM_ROOTS:
        if path == Path(root) or path.is_relative_to(root):
            return f"it is under {root}, where the system keeps its state"
    home = Path.home().resolve()
    if path.is_relative_to(home) and path != home:
        first = path.relative_to(home).parts[0]
        if first.startswith("."):
            return f"it is in {home / first}, where credentials and settings live"
    for part in path.parts:
        if part.lower() in _SECRET_PARTS:
            return f"it is in a {part} folder, where credentials live"
    if _SECRET_FILE.match(path.name):
        return f"its name ({path.name}) is that of a key or secrets file"
    return None


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

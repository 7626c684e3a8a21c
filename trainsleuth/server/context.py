"""What every tool handler can reach: configuration, workspace policy and the state store."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trainsleuth.server.workspace import PolicyError, WorkspacePolicy
from trainsleuth.state.store import Store, default_state_path
from trainsleuth.tools.interpreter import InterpreterError, resolve_interpreter

DEFAULT_MAX_TEXT_CHARS = 20_000
# A long tool call waits this long for its job, then hands back the job id (clients time out at ~60 s).
DEFAULT_CALL_WAIT_S = 40.0


@dataclass
class ServerConfig:
    workspaces: list[Path] = field(default_factory=lambda: [Path.cwd()])
    state_path: Path | None = None
    # Accept a person's decisions only through elicitation; also recorded in the workspace's sealed
    # state when the protocol first runs, so every later server on the workspace applies it too.
    elicitation_only: bool = False
    # Where one-time approval codes are shown (default: the server's stderr and terminal). Tests and
    # embedding applications pass their own; it must never reach the assistant.
    approval_notifier: Callable[[str], None] | None = None
    # Interpreters outside the workspaces that tools may launch (besides the server's own).
    allowed_interpreters: list[Path] = field(default_factory=list)
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS
    # structuredContent over this is cut, the whole result written to .trainsleuth/results/.
    max_structured_chars: int = DEFAULT_MAX_TEXT_CHARS
    # TRAINSLEUTH_CALL_WAIT_S lowers it for clients with shorter request timeouts (or raises it).
    call_wait_s: float = field(
        default_factory=lambda: _env_float("TRAINSLEUTH_CALL_WAIT_S", DEFAULT_CALL_WAIT_S)
    )
    # Explicit inputs a tool only reads (a log, a wheel folder) may lie outside the workspaces;
    # TRAINSLEUTH_OUTSIDE_READS=0 in the server's environment refuses them too.
    outside_reads: bool = field(
        default_factory=lambda: (
            os.environ.get("TRAINSLEUTH_OUTSIDE_READS", "1").strip().lower()
            not in ("0", "no", "false", "off")
        )
    )


def _env_float(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value >= 0 else default


class ServerContext:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.policy = WorkspacePolicy(config.workspaces)
        self._store: Store | None = None
        self._store_lock = threading.Lock()

    @property
    def workspace(self) -> Path:
        return self.policy.primary

    @property
    def workspace_files(self) -> Path:
        """`WORKSPACE/.trainsleuth/` (git-ignored): scratch, RCA documents, spilled results, caches."""
        from trainsleuth.state.location import workspace_dir

        return workspace_dir(self.workspace)

    @property
    def state_path(self) -> Path:
        return self.config.state_path or default_state_path(self.workspace)

    def interpreter(self, python: str | None) -> Path:
        """The interpreter that runs user code: `python` or the project's default.

        Allowed by default: interpreters inside a workspace (its .venv), the active conda env or
        virtualenv the server was started in, `python` on the server's PATH, and the server's own
        (see docs/clients.md, "Which Python runs your code"). Others must be allowed by the person
        (`trainsleuth install CLIENT --python PATH`, i.e. `serve --allow-python PATH`): a tool given
        an arbitrary executable as "python" would run it. The executable itself is never resolved:
        every venv's python links to the same base interpreter, yet each venv is a different
        environment (its own site-packages).
        """
        from trainsleuth.tools.interpreter import discovered_interpreters

        try:
            path = _unlinked(resolve_interpreter(python, self.workspace))
        except InterpreterError as exc:
            raise PolicyError(
                f"python: {exc}; pass an existing interpreter, e.g. the project's .venv/bin/python"
            ) from None
        found = discovered_interpreters(self.workspace)
        allowed = {_unlinked(p) for p in found.values()} | {
            _unlinked(p) for p in self.config.allowed_interpreters
        }
        if path in allowed or self.policy.contains(path.parent):
            return path
        known = ", ".join(f"{label} ({p})" for label, p in found.items())
        raise PolicyError(
            f"python: interpreter {str(path)!r} is outside the workspace and not allowed: it is not one the server "
            f"runs code with by default ({known}, or one "
            "inside a workspace). Running code with it needs your permission: reinstall with `trainsleuth install "
            f"CLIENT --python {path}` (CLIENT: claude-code, cursor, vscode, windsurf or claude-desktop; then restart "
            f"the client), or start the server with `trainsleuth serve --allow-python {path}`"
        )

    @property
    def store(self) -> Store:
        """Opened on first use, so a server that never needs state never creates any. The default
        location is outside the workspace; an older in-workspace database is migrated there first."""
        with self._store_lock:
            if self._store is None:
                from trainsleuth.state.location import migrate_legacy

                if self.config.state_path is None:
                    migrate_legacy(self.workspace, self.state_path)
                self._store = Store(self.state_path, workspace=self.workspace)
                if self.config.elicitation_only:
                    _record_elicitation_only(self._store)
            return self._store


def _unlinked(path: Path) -> Path:
    """Absolute, with its folders resolved but the final name (usually a symlink) kept."""
    absolute = Path(os.path.abspath(path))
    return absolute.parent.resolve() / absolute.name


def _record_elicitation_only(store: Store) -> None:
    from trainsleuth.protocol.approvals import APPROVAL_POLICY, set_setting
    from trainsleuth.protocol.ledger import sealed_tx

    with sealed_tx(store) as conn:
        set_setting(conn, APPROVAL_POLICY, "elicitation_only")

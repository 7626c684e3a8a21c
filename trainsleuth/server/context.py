"""What every tool handler can reach: configuration, workspace policy and the state store."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from trainsleuth.protocol.store import Store, default_state_path
from trainsleuth.server.workspace import PolicyError, WorkspacePolicy
from trainsleuth.tools.interpreter import InterpreterError, resolve_interpreter

DEFAULT_MAX_TEXT_CHARS = 20_000


@dataclass
class ServerConfig:
    workspaces: list[Path] = field(default_factory=lambda: [Path.cwd()])
    state_path: Path | None = None
    # Accept diagnosis approval only through elicitation (never through approve_diagnosis).
    elicitation_only: bool = False
    # Interpreters outside the workspaces that tools may launch (besides the server's own).
    allowed_interpreters: list[Path] = field(default_factory=list)
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS


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
    def state_path(self) -> Path:
        return self.config.state_path or default_state_path(self.workspace)

    def interpreter(self, python: str | None) -> Path:
        """The interpreter that runs user code: `python` or the project's default.

        It must be inside a workspace, be the server's own interpreter, or be allowed with
        `--allow-python`; anything else is refused (it would run arbitrary programs).
        """
        import sys

        try:
            path = resolve_interpreter(python, self.workspace)
        except InterpreterError as exc:
            raise PolicyError(f"python: {exc}") from None
        allowed = {Path(sys.executable).absolute(), *(p.absolute() for p in self.config.allowed_interpreters)}
        if path.absolute() in allowed or self.policy.contains(path.absolute()):
            return path
        # a venv's python is usually a symlink: judge by where it lives, not where it points
        if self.policy.contains(path.parent.resolve()):
            return path
        raise PolicyError(
            f"python: interpreter {str(path)!r} is outside the workspace and not allowed; "
            "use one inside the workspace (e.g. its .venv), or start the server with --allow-python PATH"
        )

    @property
    def store(self) -> Store:
        """Opened on first use, so a server that never needs state never writes into the workspace."""
        with self._store_lock:
            if self._store is None:
                self._store = Store(self.state_path)
            return self._store

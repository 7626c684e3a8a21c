"""What the installed client runs: the user's interpreters (`--python`) and an HTTP entry with its token.

`--python PATH` becomes `serve --allow-python PATH` in the client's config: the server then runs user
code with that interpreter too (besides the ones it finds itself, see server/context.py). `--url` writes
a streamable-HTTP entry with the server's bearer token, read from the token file the server made for
its address (server/tokens.py); a project config that git would commit is refused, and the file is
written readable by its owner only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any


class InstallServerError(Exception):
    """Raised as InstallError by the installer; the message says what to do."""


def check_pythons(pythons: list[Path]) -> list[Path]:
    """`--python PATH`: interpreters the server may run user code with; each must exist and run."""
    out = []
    for raw in pythons:
        path = Path(os.path.expanduser(str(raw)))
        if not path.is_absolute():
            found = shutil.which(str(raw))
            path = Path(found) if found else path.absolute()
        if not path.is_file() or not os.access(path, os.X_OK):
            raise InstallServerError(f"--python {raw}: {path} is not an executable file; nothing was changed")
        out.append(Path(os.path.abspath(path)))
    return out


def http_entry(client: str, url: str, token: str) -> dict[str, Any]:
    """A streamable-HTTP server entry with the bearer token, in the client's own format."""
    headers = {"Authorization": f"Bearer {token}"}
    if client == "windsurf":
        return {"serverUrl": url, "headers": headers}
    if client == "cursor":
        return {"url": url, "headers": headers}
    return {"type": "http", "url": url, "headers": headers}


def http_token(url: str, token_file: Path | None) -> str:
    from trainsleuth.server.tokens import TokenError, find_token, read_token_file

    try:
        if token_file is not None:
            return read_token_file(token_file)
        token, path = find_token(url)
    except TokenError as exc:
        raise InstallServerError(f"{exc}; nothing was changed") from None
    if token is None:
        raise InstallServerError(
            f"no token for {url}: start the server once (`trainsleuth serve --transport http --port PORT`), which "
            f"stores its token in {path}, or pass --token-file FILE; nothing was changed"
        )
    return token


def tracked_by_git(path: Path) -> bool:
    """Whether a project file would be committed (it is in a git work tree and not ignored)."""
    folder = path.parent if path.parent.exists() else path.parent.parent
    try:
        inside = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--is-inside-work-tree"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return False
        ignored = subprocess.run(
            ["git", "-C", str(folder), "check-ignore", "-q", str(path)], capture_output=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return ignored.returncode != 0

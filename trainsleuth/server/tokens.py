"""Bearer tokens for `serve --transport http`: made once per server address, kept in a private file.

Loopback is not private: any local process (any user's, on a shared machine) can reach
127.0.0.1, and `bisect_commits` runs shell commands. So an HTTP server requires a token by
default. The token is generated the first time a server listens on an address and stored in a
file only its owner can read (0600, in a 0700 per-user folder), never on the command line (where
`ps` shows it to everyone). Clients on the same account find it there: `trainsleuth client --url`
and `trainsleuth install CLIENT --url` read the file for the URL's address. The same file is
reused by later servers on that address, so client configurations stay valid across restarts.

Standard library only: the client imports this without the server's dependencies.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

TOKEN_ENV = "TRAINSLEUTH_TOKEN"
TOKEN_DIR_ENV = "TRAINSLEUTH_TOKEN_DIR"


class TokenError(Exception):
    """A token file cannot be used; the message says which and how to fix it."""


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_dir(env: Mapping[str, str] | None = None) -> Path:
    """The per-user folder for token files (TRAINSLEUTH_TOKEN_DIR overrides)."""
    env = os.environ if env is None else env
    if env.get(TOKEN_DIR_ENV):
        return Path(env[TOKEN_DIR_ENV])
    if sys.platform.startswith("win"):
        base = Path(env.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
        return base / "trainsleuth" / "tokens"
    base = Path(env.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "trainsleuth" / "tokens"


def token_path(host: str, port: int, env: Mapping[str, str] | None = None) -> Path:
    """The token file of a server address; every loopback name of one port shares a file."""
    key = "loopback" if is_loopback(host) or host in ("0.0.0.0", "::", "[::]") else host
    key = re.sub(r"[^A-Za-z0-9._-]", "_", key)
    return token_dir(env) / f"http-{key}-{port}.token"


def read_token_file(path: Path) -> str:
    """The token in `path`; refused when others could read it (they could use the server)."""
    try:
        st = path.stat()
    except OSError as exc:
        raise TokenError(f"cannot read the token file {path}: {exc.strerror or exc}") from None
    if os.name == "posix":
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise TokenError(
                f"the token file {path} can be read by other users (mode {stat.filemode(st.st_mode)}); "
                f"run `chmod 600 {path}` (or delete it to make a new token)"
            )
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise TokenError(f"the token file {path} belongs to another user; delete it to make a new token")
    token = path.read_text(encoding="utf-8").strip()
    if not token:
        raise TokenError(f"the token file {path} is empty; delete it to make a new token")
    return token


def ensure_token(host: str, port: int, env: Mapping[str, str] | None = None) -> tuple[str, Path, bool]:
    """The token of this server address: read from its file, or made and stored (token, path, created)."""
    path = token_path(host, port, env)
    if path.exists():
        return read_token_file(path), path, False
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if os.name == "posix":
        os.chmod(folder, 0o700)
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another server made it meanwhile
        return read_token_file(path), path, False
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")
    return token, path, True


def url_address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return host, port


def find_token(url: str, env: Mapping[str, str] | None = None) -> tuple[str | None, Path]:
    """The stored token for a server URL, if this account's token folder holds one (token, file)."""
    host, port = url_address(url)
    path = token_path(host, port, env)
    if not path.exists():
        return None, path
    return read_token_file(path), path

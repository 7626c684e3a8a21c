"""One server per workspace kept alive between `trainsleuth client call|tools|describe` invocations.

Starting a server costs 1-3 s; an investigation makes 13-33 calls. So the first call starts
`trainsleuth serve --transport unix` in the background (its own session: no terminal, so it shows the
person no code; the person decides with `trainsleuth approve` as before) and every later call connects
to its socket (`server/unixsock.py`). What it serves is what a per-call server would have served:

- one server per (workspace, server command, environment, installed trainsleuth): a call from another
  environment (PATH, an activated venv or conda env, TRAINSLEUTH_* settings) or after an upgrade gets a
  server of its own, so the workspace, the interpreter policy and the approval settings are the caller's;
- the socket and its files live in a folder only the user can enter (the per-user state folder, or a
  private folder in the temp dir when that path is too long for a socket); the server checks each peer's
  user id where the platform says it;
- two calls racing to start it take a lock: one starts it, the other connects; a socket left by a server
  that crashed (nobody answers) is removed and a new server started; a server that does not answer its
  handshake in time is stopped and replaced;
- it exits by itself after 10 minutes without a call (`TRAINSLEUTH_KEEP_IDLE_S`).

Opt out with `--no-keep` or `TRAINSLEUTH_KEEP_SERVER=0` (a server per call, as before); `trainsleuth client
stop` stops the workspace's kept servers. Windows (no Unix sockets there) always uses a server per call.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from trainsleuth.clients.lite import LiteClient, LiteError

KEEP_ENV = "TRAINSLEUTH_KEEP_SERVER"
IDLE_ENV = "TRAINSLEUTH_KEEP_IDLE_S"
DEFAULT_IDLE_S = 600.0
START_TIMEOUT_S = 60.0
HANDSHAKE_TIMEOUT_S = 15.0
# AF_UNIX paths are limited to about 104-108 bytes, the terminating NUL included.
MAX_SOCKET_PATH = 100
# What a shell changes from one command to the next: it does not call for another server.
VOLATILE_ENV = frozenset({"_", "SHLVL", "PWD", "OLDPWD", "COLUMNS", "LINES", KEEP_ENV})


class KeepError(Exception):
    """The kept server cannot be used (the caller falls back to a server of its own for the call)."""


def wanted(no_keep: bool = False, env: Mapping[str, str] | None = None) -> bool:
    """Whether calls go to a kept server: not with --no-keep, TRAINSLEUTH_KEEP_SERVER=0, or no Unix sockets."""
    env = os.environ if env is None else env
    if no_keep or os.name == "nt" or not hasattr(socket, "AF_UNIX"):
        return False
    return env.get(KEEP_ENV, "1").strip().lower() not in ("0", "no", "false", "off")


def idle_seconds(env: Mapping[str, str]) -> float:
    try:
        return max(1.0, float(env.get(IDLE_ENV, DEFAULT_IDLE_S)))
    except ValueError:
        return DEFAULT_IDLE_S


@dataclass(frozen=True)
class Place:
    """Where one kept server's socket, pid file, start lock, log and description live."""

    socket: Path

    @property
    def pid_file(self) -> Path:
        return self.socket.with_suffix(".pid")

    @property
    def lock(self) -> Path:
        return self.socket.with_suffix(".lock")

    @property
    def log(self) -> Path:
        return self.socket.with_suffix(".log")

    @property
    def meta(self) -> Path:
        return self.socket.with_suffix(".json")


def _private(folder: Path) -> Path:
    """`folder`, created 0700 and checked: a real folder (no symlink) of this user that nobody else can enter."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = os.lstat(folder)
    import stat

    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise KeepError(f"{folder} is not a folder of this user")
    if info.st_mode & 0o077:
        os.chmod(folder, 0o700)
        if os.lstat(folder).st_mode & 0o077:
            raise KeepError(f"{folder} is open to other users")
    return folder


def runtime_dir() -> Path:
    """The folder of the kept servers: beside the per-user state, else a private folder in the temp dir."""
    from trainsleuth.state.location import state_root

    preferred = state_root() / "servers"
    if len(str(preferred)) + 30 <= MAX_SOCKET_PATH:
        return _private(preferred)
    return _private(Path(tempfile.gettempdir()) / f"trainsleuth-{os.getuid()}")


def package_stamp() -> str:
    """Changes when the installed trainsleuth changes (an upgrade, or an edit of its code)."""
    import trainsleuth

    root = Path(trainsleuth.__file__).parent
    digest = hashlib.sha256(trainsleuth.__version__.encode())
    stack = [root]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        stack.append(Path(entry.path))
                elif entry.name.endswith(".py"):
                    info = entry.stat()
                    digest.update(f"{entry.path}:{info.st_mtime_ns}:{info.st_size}\n".encode())
    return digest.hexdigest()


def place_for(command: list[str], workspace: Path, env: Mapping[str, str]) -> Place:
    """The kept server for this workspace, server command, environment and installation."""
    settings = sorted((k, v) for k, v in env.items() if k not in VOLATILE_ENV)
    key = json.dumps([os.path.realpath(workspace), command, settings, package_stamp()])
    name = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:20]
    return Place(runtime_dir() / f"{name}.sock")


@contextmanager
def _start_lock(place: Place) -> Iterator[None]:
    import fcntl

    fd = os.open(place.lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _session(place: Place) -> LiteClient | None:
    """An initialized session on the kept server, or None when nobody answers at its socket."""
    try:
        client = LiteClient.connect(place.socket, timeout_s=5.0, log=place.log)
    except OSError:
        return None
    try:
        client.initialize(timeout_s=HANDSHAKE_TIMEOUT_S)
    except (LiteError, OSError):
        client.close()
        return None
    return client


def connect(command: list[str], workspace: Path, env: Mapping[str, str]) -> LiteClient:
    """A session on the workspace's kept server, started first when there is none (or a dead one)."""
    try:
        place = place_for(command, workspace, env)
        client = _session(place)
        if client is not None:
            return client
        with _start_lock(place):
            client = _session(place)  # another call may have started it while this one waited
            if client is not None:
                return client
            _stop_pid(place)  # a server that holds the pid file but does not answer
            try:
                place.socket.unlink()  # left by a server that died
            except FileNotFoundError:
                pass
            _start(place, command, workspace, env)
            client = _session(place)
    except OSError as exc:
        raise KeepError(f"cannot keep a server for {workspace}: {exc}") from exc
    if client is None:
        raise KeepError(f"the kept server at {place.socket} started but does not answer{_log_tail(place)}")
    return client


def _start(place: Place, command: list[str], workspace: Path, env: Mapping[str, str]) -> None:
    argv = [
        *command,
        "--transport",
        "unix",
        "--socket",
        str(place.socket),
        "--idle-exit",
        f"{idle_seconds(env):g}",
    ]
    log_fd = os.open(place.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        proc = subprocess.Popen(
            argv,
            cwd=str(workspace),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            start_new_session=True,  # no terminal, and a ^C in the caller's shell does not reach it
            close_fds=True,
        )
    finally:
        os.close(log_fd)
    place.meta.write_text(json.dumps({"workspace": os.path.realpath(workspace), "argv": argv}) + "\n")
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if place.socket.exists():
            return
        code = proc.poll()
        if code is not None:
            raise KeepError(f"the kept server exited with code {code} while starting{_log_tail(place)}")
        time.sleep(0.02)
    proc.terminate()
    raise KeepError(f"the kept server did not open its socket within {START_TIMEOUT_S:g} s{_log_tail(place)}")


def _log_tail(place: Place) -> str:
    try:
        tail = place.log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-8:]
    except OSError:
        return ""
    return ("\nserver log:\n" + "\n".join(tail)) if tail else ""


def _pid_of(place: Place) -> int | None:
    """The pid of the server that wrote the pid file, if it is still that server (not a reused pid)."""
    import psutil

    try:
        pid = int(json.loads(place.pid_file.read_text()).get("pid"))
        cmdline = psutil.Process(pid).cmdline()
    except (OSError, ValueError, TypeError, psutil.Error):
        return None
    return pid if str(place.socket) in cmdline else None


def _stop_pid(place: Place, wait_s: float = 5.0) -> bool:
    """Stop the server of `place` (SIGTERM, then SIGKILL); True when one was running."""
    import psutil

    pid = _pid_of(place)
    if pid is None:
        return False
    try:
        proc = psutil.Process(pid)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=wait_s)
    except psutil.TimeoutExpired:
        proc.kill()
    except psutil.Error:
        pass
    return True


def stop(workspace: Path | None) -> list[int]:
    """Stop the kept servers of `workspace` (every one when None); returns their pids."""
    try:
        folder = runtime_dir()
    except (OSError, KeepError):
        return []
    real = os.path.realpath(workspace) if workspace is not None else None
    stopped = []
    for meta in sorted(folder.glob("*.json")):
        try:
            served = json.loads(meta.read_text()).get("workspace")
        except (OSError, ValueError):
            continue
        if real is not None and served != real:
            continue
        place = Place(meta.with_suffix(".sock"))
        pid = _pid_of(place)
        if pid is not None and _stop_pid(place):
            stopped.append(pid)
        for leftover in (place.meta, place.log, place.lock):
            try:
                leftover.unlink()
            except OSError:
                pass
    return stopped


__all__ = ["KEEP_ENV", "KeepError", "Place", "connect", "place_for", "stop", "wanted"]

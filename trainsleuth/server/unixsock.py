"""The kept server's transport: MCP over a Unix socket only this user can reach, one session per connection.

`trainsleuth client call` keeps one server per workspace alive between calls (`clients/keep.py`), so a
call costs a connection instead of a server start. Each connection is an MCP session exactly like one
over stdio (newline-delimited JSON-RPC), served concurrently. A connection that closes cancels what its
session left running (a long call's job included, as when a stdio client goes away). The socket lives
in a folder only the user can enter (mode 0700), is itself 0600, and every peer's user id is checked
where the platform tells it (Linux). The server exits by itself after `idle_s` without a connection,
and on SIGTERM; it removes its socket and pid file when it goes (unless another server replaced them).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import struct
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.server.mcpserver import MCPServer

log = logging.getLogger("trainsleuth.keep")

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
CHECK_IDLE_S = 1.0


def peer_uid(sock: socket.socket) -> int | None:
    """The user id of the process at the other end (Linux); None where the platform does not say."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    except OSError:
        return None
    return int(struct.unpack("3i", raw)[1])


class KeptServer:
    """Serves `server` at `path` until idle for `idle_s` (or SIGTERM)."""

    def __init__(self, server: MCPServer, path: Path, idle_s: float, pid_file: Path | None = None) -> None:
        self.server = server
        self.path = path
        self.idle_s = idle_s
        self.pid_file = pid_file
        self.active = 0
        self.last_activity = time.monotonic()

    async def serve(self) -> None:
        listener = await anyio.create_unix_listener(self.path, mode=0o600)
        identity = os.stat(self.path).st_ino
        if self.pid_file is not None:
            self.pid_file.write_text(json.dumps({"pid": os.getpid(), "socket": str(self.path)}) + "\n")
        log.info(
            "kept server %d listening at %s (exits after %g s idle)", os.getpid(), self.path, self.idle_s
        )
        try:
            async with listener, anyio.create_task_group() as tg:
                tg.start_soon(self._exit_when_idle, tg.cancel_scope)
                tg.start_soon(self._exit_on_signal, tg.cancel_scope)
                await listener.serve(self._session, task_group=tg)
        finally:
            self._remove_own_files(identity)

    async def _exit_when_idle(self, scope: anyio.CancelScope) -> None:
        while True:
            await anyio.sleep(CHECK_IDLE_S)
            if self.active == 0 and time.monotonic() - self.last_activity >= self.idle_s:
                log.info("kept server %d idle for %g s: exiting", os.getpid(), self.idle_s)
                scope.cancel()
                return

    async def _exit_on_signal(self, scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                log.info("kept server %d stopped by a signal", os.getpid())
                scope.cancel()
                return

    def _remove_own_files(self, identity: int) -> None:
        try:
            if os.stat(self.path).st_ino == identity:  # not a socket a newer server put here
                self.path.unlink()
        except OSError:
            pass
        if self.pid_file is not None:
            try:
                if json.loads(self.pid_file.read_text()).get("pid") == os.getpid():
                    self.pid_file.unlink()
            except (OSError, ValueError):
                pass

    async def _session(self, stream: anyio.abc.SocketStream) -> None:
        self.active += 1
        try:
            raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
            uid = peer_uid(raw)
            if uid is not None and uid != os.getuid():
                log.warning("refused a connection from user id %d on %s", uid, self.path)
                return
            await self._serve_session(stream)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
            pass
        finally:
            self.active -= 1
            self.last_activity = time.monotonic()
            await stream.aclose()

    async def _serve_session(self, stream: anyio.abc.SocketStream) -> None:
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
        buffered = BufferedByteReceiveStream(stream)
        lowlevel: Any = self.server._lowlevel_server

        async def writer() -> None:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    try:
                        await stream.send(data.encode("utf-8") + b"\n")
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                        return  # the client went away; the reader sees it too

        async def run() -> None:
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            tg.start_soon(run)
            async with read_writer:
                while True:
                    try:
                        line = await buffered.receive_until(b"\n", MAX_MESSAGE_BYTES)
                    except (anyio.EndOfStream, anyio.IncompleteRead):
                        break
                    self.last_activity = time.monotonic()
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except Exception as exc:
                        await read_writer.send(exc)
                        continue
                    await read_writer.send(SessionMessage(message))
            # The client went away: whatever its session still runs is cancelled (a waiting call's job too).
            tg.cancel_scope.cancel()


def serve_unix(server: MCPServer, path: Path, idle_s: float, pid_file: Path | None = None) -> None:
    anyio.run(KeptServer(server, path, idle_s, pid_file).serve)


__all__ = ["KeptServer", "peer_uid", "serve_unix"]

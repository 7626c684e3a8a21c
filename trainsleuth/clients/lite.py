"""A small MCP client for `trainsleuth client call|tools|describe`: over stdio, or a kept server's socket.

One call from the command line should not pay for loading the SDK's client (about half a second of
CPU). This client speaks just what those commands need: initialize, tools/list, tools/call,
newline-delimited JSON-RPC, either on the stdin/stdout of a server it starts or on the Unix socket of
the server `clients/keep.py` keeps for the workspace. It answers the server's own requests (ping with
an empty result, roots with none, elicitation declined: nobody is there to answer) and relays progress
notifications to a callback. Playbooks, HTTP and elicitation use the SDK's client (`clients/scripted.py`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

PROTOCOL_VERSION = "2025-06-18"


class LiteError(Exception):
    """The server could not be started, broke the connection, or answered with a JSON-RPC error."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


Progress = Callable[[float, float | None, str | None], None]


class LiteClient:
    """An MCP session on a server this client starts (`LiteClient(command)`) or on a kept server's socket
    (`LiteClient.connect(path)`)."""

    def __init__(
        self, command: list[str], cwd: Path | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        try:
            self.proc: subprocess.Popen[str] | None = subprocess.Popen(
                command,
                cwd=str(cwd) if cwd else None,
                env=dict(env) if env is not None else None,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                bufsize=1,
            )
        except OSError as exc:
            raise LiteError(f"cannot start the server {command[0]!r}: {exc}") from exc
        self._sock: socket.socket | None = None
        self._log: Path | None = None
        self._stderr: list[str] = []
        self._next_id = 0
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self._in: IO[str] = self.proc.stdout
        self._out: IO[str] = self.proc.stdin
        # Drain stderr (the server's log) so it can never fill the pipe and stall the server.
        threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True).start()

    @classmethod
    def connect(cls, path: Path, timeout_s: float = 5.0, log: Path | None = None) -> LiteClient:
        """A session on the server listening at the Unix socket `path`; OSError when nobody listens there."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout_s)
            sock.connect(str(path))
            sock.settimeout(None)  # a call may take as long as the tool does
        except OSError:
            sock.close()
            raise
        self = cls.__new__(cls)
        self.proc = None
        self._sock = sock
        self._log = log
        self._stderr = []
        self._next_id = 0
        self._in = sock.makefile("r", encoding="utf-8", newline="\n")
        self._out = sock.makefile("w", encoding="utf-8", newline="\n")
        return self

    def _drain(self, stream: IO[str]) -> None:
        for line in stream:
            self._stderr.append(line)
            del self._stderr[:-40]

    def __enter__(self) -> LiteClient:
        self.initialize()
        return self

    def initialize(self, timeout_s: float | None = None) -> None:
        """The MCP handshake; on a socket, `timeout_s` bounds it (a server that does not answer is not used)."""
        if self._sock is not None:
            self._sock.settimeout(timeout_s)
        try:
            self.request(
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "trainsleuth-client", "version": "1"},
                },
            )
            self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        finally:
            if self._sock is not None:
                self._sock.settimeout(None)

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            for stream in (self._out, self._in):
                try:
                    stream.close()
                except OSError:
                    pass
            try:
                self._sock.close()
            except OSError:
                pass
            return
        assert self.proc is not None
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    # -- wire
    def _send(self, message: dict[str, Any]) -> None:
        try:
            self._out.write(json.dumps(message) + "\n")
            self._out.flush()
        except OSError as exc:
            raise LiteError(f"the server closed its input: {exc}{self._log_tail()}") from exc

    def _log_tail(self) -> str:
        lines = self._stderr[-10:]
        if self._log is not None:
            try:
                lines = self._log.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)[
                    -10:
                ]
            except OSError:
                lines = []
        tail = "".join(lines).strip()
        return f"\nserver log:\n{tail}" if tail else ""

    def request(self, method: str, params: dict[str, Any], on_progress: Progress | None = None) -> Any:
        self._next_id += 1
        rid = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        if on_progress is not None:
            message["params"] = {**params, "_meta": {"progressToken": rid}}
        self._send(message)
        for line in self._in:
            line = line.strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue  # not ours to judge; the server logs to stderr
            if "method" in msg:
                self._on_server_message(msg, on_progress)
                continue
            if msg.get("id") != rid:
                continue
            if "error" in msg:
                err = msg["error"] or {}
                raise LiteError(str(err.get("message", "error")), err.get("code"))
            return msg.get("result")
        if self.proc is None:
            raise LiteError(
                f"the kept server closed the connection before answering {method}{self._log_tail()}"
            )
        code = self.proc.poll()
        raise LiteError(f"the server exited (code {code}) before answering {method}{self._log_tail()}")

    def _on_server_message(self, msg: dict[str, Any], on_progress: Progress | None) -> None:
        method = msg["method"]
        if "id" not in msg:  # a notification
            if method == "notifications/progress" and on_progress is not None:
                p = msg.get("params") or {}
                on_progress(float(p.get("progress", 0)), p.get("total"), p.get("message"))
            return
        if method == "ping":
            reply: dict[str, Any] = {"result": {}}
        elif method == "roots/list":
            reply = {"result": {"roots": []}}
        elif method == "elicitation/create":
            reply = {"result": {"action": "decline"}}
        else:
            reply = {"error": {"code": -32601, "message": f"method not supported by this client: {method}"}}
        self._send({"jsonrpc": "2.0", "id": msg["id"], **reply})

    # -- MCP
    def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            result = self.request("tools/list", {"cursor": cursor} if cursor else {})
            tools += result.get("tools", [])
            cursor = result.get("nextCursor")
            if not cursor:
                return tools

    def call_tool(
        self, name: str, arguments: dict[str, Any], on_progress: Progress | None = None
    ) -> dict[str, Any]:
        result = self.request("tools/call", {"name": name, "arguments": arguments}, on_progress)
        return dict(result or {})


def text_of(content: list[dict[str, Any]]) -> str:
    parts = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "image":
            parts.append(f"[image {block.get('mimeType', '')}]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.get('uri', '')}]")
    return "\n".join(parts)


def default_env() -> dict[str, str]:
    return dict(os.environ)


__all__ = ["LiteClient", "LiteError", "text_of"]

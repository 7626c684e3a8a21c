"""A small MCP client over stdio for `trainsleuth client call|tools|describe`.

One call from the command line pays for starting a server; it should not also pay for loading the
SDK's client (about half a second of CPU). This client speaks just what those commands need:
initialize, tools/list, tools/call, newline-delimited JSON-RPC on the server's stdin/stdout. It
answers the server's own requests (ping with an empty result, roots with none, elicitation
declined: nobody is there to answer) and relays progress notifications to a callback. Playbooks,
HTTP and elicitation use the SDK's client (`clients/scripted.py`).
"""

from __future__ import annotations

import json
import os
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
    def __init__(
        self, command: list[str], cwd: Path | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        try:
            self.proc = subprocess.Popen(
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
        self._stderr: list[str] = []
        self._next_id = 0
        # Drain stderr (the server's log) so it can never fill the pipe and stall the server.
        assert self.proc.stderr is not None
        threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True).start()

    def _drain(self, stream: IO[str]) -> None:
        for line in stream:
            self._stderr.append(line)
            del self._stderr[:-40]

    def __enter__(self) -> LiteClient:
        self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "trainsleuth-client", "version": "1"},
            },
        )
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
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
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise LiteError(f"the server closed its input: {exc}{self._log_tail()}") from exc

    def _log_tail(self) -> str:
        tail = "".join(self._stderr[-10:]).strip()
        return f"\nserver log:\n{tail}" if tail else ""

    def request(self, method: str, params: dict[str, Any], on_progress: Progress | None = None) -> Any:
        self._next_id += 1
        rid = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        if on_progress is not None:
            message["params"] = {**params, "_meta": {"progressToken": rid}}
        self._send(message)
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
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

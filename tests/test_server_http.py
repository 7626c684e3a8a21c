"""Streamable HTTP: loopback by default, DNS-rebinding protection, and a bearer token on every request.

Each server gets its own token folder (TRAINSLEUTH_TOKEN_DIR), so tests never touch the user's tokens.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from trainsleuth.server.tokens import TOKEN_DIR_ENV, token_path

TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# The token folder of each running test server, by port.
TOKEN_DIRS: dict[int, str] = {}


def bearer(port: int) -> dict[str, str]:
    """The Authorization header for the test server on `port` (its token, from its token file)."""
    path = token_path("127.0.0.1", port, {TOKEN_DIR_ENV: TOKEN_DIRS[port]})
    return {"Authorization": f"Bearer {path.read_text().strip()}"}


def http_client(port: int, **kwargs: Any) -> Client:
    """A real MCP client over streamable HTTP that sends the server's token."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    transport = streamable_http_client(
        f"http://127.0.0.1:{port}/mcp", http_client=create_mcp_http_client(headers=bearer(port))
    )
    return Client(transport, **kwargs)


@contextmanager
def http_server(
    workspace: Path, *extra: str, env: dict[str, str] | None = None, port: int | None = None
) -> Iterator[int]:
    port = port or free_port()
    env = {TOKEN_DIR_ENV: tempfile.mkdtemp(prefix="ts-tokens-"), **(env or {})}
    TOKEN_DIRS[port] = env[TOKEN_DIR_ENV]
    proc = subprocess.Popen(
        [
            TRAINSLEUTH,
            "serve",
            "--transport",
            "http",
            "--port",
            str(port),
            "--workspace",
            str(workspace),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**{k: v for k, v in os.environ.items() if k != "TRAINSLEUTH_TOKEN"}, **env},
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def post(port: int, headers: dict[str, str], body: dict | None = None) -> tuple[int, str]:  # type: ignore[type-arg]
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp",
        data=json.dumps(body or INIT).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.anyio
async def test_http_client_lists_and_calls_tools(workspace: Path) -> None:
    with http_server(workspace) as port:
        async with http_client(port) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "analyze_training_log" in names and "start_investigation" in names
            result = await client.call_tool("analyze_training_log", {"path": "/etc/passwd"})
            assert result.is_error and "outside the workspace" in result.content[0].text


def test_http_dns_rebinding_protection(workspace: Path) -> None:
    with http_server(workspace) as port:
        auth = bearer(port)
        status, _ = post(port, {"Host": f"127.0.0.1:{port}", **auth})
        assert status == 200
        status, body = post(port, {"Host": "evil.example.com", **auth})
        assert status == 421, body
        status, body = post(port, {"Host": f"127.0.0.1:{port}", "Origin": "http://evil.example.com", **auth})
        assert status == 403, body


def test_non_loopback_bind_without_token_is_refused(workspace: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRAINSLEUTH_TOKEN"}
    proc = subprocess.run(
        [TRAINSLEUTH, "serve", "--transport", "http", "--host", "0.0.0.0", "--port", str(free_port()),
         "--workspace", str(workspace), "--no-auth"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "without a token" in proc.stderr and "--token-file" in proc.stderr


def test_token_is_checked_on_every_request(workspace: Path) -> None:
    with http_server(workspace, "--host", "0.0.0.0", env={"TRAINSLEUTH_TOKEN": "s3cret"}) as port:
        status, _ = post(port, {})
        assert status == 401
        status, _ = post(port, {"Authorization": "Bearer wrong"})
        assert status == 401
        status, body = post(port, {"Authorization": "Bearer s3cret"})
        assert status == 200, body
        assert "trainsleuth" in body

"""Streamable HTTP transport: loopback by default, DNS-rebinding protection, a bearer token always
(unless `--no-auth` on loopback). Token files: `trainsleuth/server/tokens.py`."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Sequence

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from trainsleuth.server.tokens import TOKEN_ENV, is_loopback

log = logging.getLogger("trainsleuth.http")

__all__ = ["TOKEN_ENV", "ConfigurationError", "build_http_app", "check_bind", "is_loopback", "serve_http"]


class ConfigurationError(Exception):
    """The server refuses to start with this configuration; the message says how to fix it."""


def security_settings(host: str, port: int, extra_hosts: Sequence[str] = ()) -> TransportSecuritySettings:
    hosts = ["127.0.0.1", "localhost", "[::1]"]
    if not is_loopback(host) and host not in ("0.0.0.0", "::"):
        hosts.append(f"[{host}]" if ":" in host else host)
    hosts += list(extra_hosts)
    allowed_hosts = [h for base in hosts for h in (base, f"{base}:*")]
    allowed_origins = [
        o for base in hosts for o in (f"http://{base}", f"http://{base}:*", f"https://{base}:*")
    ]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins
    )


class BearerTokenMiddleware:
    """Every HTTP request must carry `Authorization: Bearer <token>` (constant-time compare)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = b'{"error": "missing or wrong bearer token"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b"Bearer"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def check_bind(host: str, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise ConfigurationError(
            f"refusing to serve on non-loopback address {host!r} without a token: anyone who can reach it "
            "could run code in your workspace. Drop --no-auth (a token is then made and stored for you), "
            f"or pass --token-file FILE (or set {TOKEN_ENV}), or bind 127.0.0.1."
        )


def build_http_app(
    server: MCPServer, host: str, port: int, token: str | None, extra_hosts: Sequence[str] = ()
) -> ASGIApp:
    check_bind(host, token)
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path="/mcp", transport_security=security_settings(host, port, extra_hosts), host=host
    )
    if token:
        app = BearerTokenMiddleware(app, token)
    return app


def serve_http(
    server: MCPServer, host: str, port: int, token: str | None, extra_hosts: Sequence[str] = ()
) -> None:
    import uvicorn

    app = build_http_app(server, host, port, token, extra_hosts)
    log.info("serving MCP over streamable HTTP at http://%s:%d/mcp", host, port)
    # The MCP session manager's lifespan is part of the Starlette app; the token middleware passes it through.
    uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on")

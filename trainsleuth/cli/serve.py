"""`trainsleuth serve`: the MCP server on stdio (default) or streamable HTTP."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="run the MCP server (stdio by default; --transport http for streamable HTTP at /mcp)",
        description="Run the trainsleuth MCP server. Desktop clients launch this over stdio.",
    )
    p.add_argument(
        "--transport",
        choices=["stdio", "http", "unix"],
        default="stdio",
        help="transport (default: stdio; unix: the server `trainsleuth client` keeps per workspace)",
    )
    p.add_argument(
        "--socket",
        default=None,
        metavar="PATH",
        help="unix: the socket to listen on (its folder must be private)",
    )
    p.add_argument(
        "--idle-exit",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="unix: exit after this long without a connection (default: 600)",
    )
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="HTTP port (default: 8765)")
    p.add_argument(
        "--token-file",
        default=None,
        metavar="FILE",
        help="HTTP: read the bearer token from FILE (mode 0600). Default: the token of this address, made "
        "once and kept in a private per-user file that `trainsleuth client --url` and `install --url` read "
        "(env TRAINSLEUTH_TOKEN also works)",
    )
    p.add_argument(
        "--token",
        default=None,
        help="HTTP: the bearer token on the command line (discouraged: `ps` shows it to every user)",
    )
    p.add_argument(
        "--no-auth",
        action="store_true",
        help="HTTP on loopback without a token: any local process can then call tools that run code",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help="extra Host header value accepted over HTTP (DNS-rebinding protection); repeatable",
    )
    p.add_argument(
        "--workspace",
        action="append",
        default=None,
        metavar="PATH",
        help="folder the server may read, write and run code in; repeatable (default: current directory)",
    )
    p.add_argument(
        "--state",
        default=None,
        metavar="PATH",
        help="state database (default: per-user, outside the workspace; see `trainsleuth state show`)",
    )
    p.add_argument(
        "--elicitation-only",
        action="store_true",
        help="accept a person's decisions only through MCP elicitation (kept in the workspace's state for every server)",
    )
    p.add_argument(
        "--allow-python",
        action="append",
        default=[],
        metavar="PYTHON",
        help="interpreter outside the workspaces that tools may run user code with; repeatable",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging (to stderr)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import logging

    from trainsleuth.server.app import build_server, configure_logging
    from trainsleuth.server.context import ServerConfig
    from trainsleuth.server.http import ConfigurationError, check_bind, serve_http
    from trainsleuth.server.tokens import TokenError

    configure_logging(logging.DEBUG if args.verbose else logging.INFO)
    workspaces = [Path(w) for w in (args.workspace or [os.getcwd()])]
    for ws in workspaces:
        if not ws.is_dir():
            print(f"trainsleuth serve: workspace {str(ws)!r} is not an existing directory", file=sys.stderr)
            return 2
    token = None
    if args.transport == "http":
        try:
            token = _http_token(args)
            check_bind(args.host, token)
        except (ConfigurationError, TokenError) as exc:
            print(f"trainsleuth serve: {exc}", file=sys.stderr)
            return 2
    elif args.transport == "unix" and not args.socket:
        print("trainsleuth serve: --transport unix needs --socket PATH", file=sys.stderr)
        return 2
    elif args.token or args.token_file or args.no_auth:
        print("trainsleuth serve: --token, --token-file and --no-auth apply to --transport http only; "
              "stdio needs no token", file=sys.stderr)  # fmt: skip
    config = ServerConfig(
        workspaces=workspaces,
        state_path=Path(args.state) if args.state else None,
        elicitation_only=args.elicitation_only,
        allowed_interpreters=[Path(p) for p in args.allow_python],
    )
    server, _ = build_server(config)
    if args.transport == "stdio":
        server.run("stdio")
    elif args.transport == "unix":
        from trainsleuth.server.unixsock import serve_unix

        socket_path = Path(args.socket)
        serve_unix(server, socket_path, args.idle_exit, socket_path.with_suffix(".pid"))
    else:
        serve_http(server, args.host, args.port, token, args.allow_host)
    return 0


def _http_token(args: argparse.Namespace) -> str | None:
    """The bearer token an HTTP server requires: --token-file, TRAINSLEUTH_TOKEN, --token, or the
    address's own stored token (made on first use). None only with --no-auth, which warns."""
    from trainsleuth.server.http import ConfigurationError
    from trainsleuth.server.tokens import TOKEN_ENV, ensure_token, read_token_file

    given = [name for name, on in (("--token-file", args.token_file), ("--token", args.token)) if on]
    if args.no_auth:
        if given:
            raise ConfigurationError(f"--no-auth contradicts {' and '.join(given)}; choose one")
        print(
            "trainsleuth serve: WARNING: --no-auth: no token is required, so any process on this machine "
            "(any user's) can call tools that run commands in the workspace (bisect_commits, probes).",
            file=sys.stderr,
        )
        return None
    if args.token_file:
        return read_token_file(Path(args.token_file))
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV]
    if args.token:
        print(
            "trainsleuth serve: WARNING: --token puts the secret on the command line, where `ps` shows it to "
            f"every user; prefer --token-file FILE or {TOKEN_ENV}.",
            file=sys.stderr,
        )
        return str(args.token)
    token, path, created = ensure_token(args.host, args.port)
    print(
        f"trainsleuth serve: HTTP clients must send 'Authorization: Bearer <token>'; the token is in {path} "
        f"({'new' if created else 'kept from an earlier server on this address'}; only you can read it). "
        "`trainsleuth client --url` and `trainsleuth install CLIENT --url` find it there.",
        file=sys.stderr,
    )
    return token

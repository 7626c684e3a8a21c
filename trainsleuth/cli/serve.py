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
        "--transport", choices=["stdio", "http"], default="stdio", help="transport (default: stdio)"
    )
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="HTTP port (default: 8765)")
    p.add_argument(
        "--token",
        default=None,
        help="bearer token required on every HTTP request; mandatory off loopback (env: TRAINSLEUTH_TOKEN)",
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
    from trainsleuth.server.http import TOKEN_ENV, ConfigurationError, check_bind, serve_http

    configure_logging(logging.DEBUG if args.verbose else logging.INFO)
    workspaces = [Path(w) for w in (args.workspace or [os.getcwd()])]
    for ws in workspaces:
        if not ws.is_dir():
            print(f"trainsleuth serve: workspace {str(ws)!r} is not an existing directory", file=sys.stderr)
            return 2
    token = args.token or os.environ.get(TOKEN_ENV) or None
    if args.transport == "http":
        try:
            check_bind(args.host, token)
        except ConfigurationError as exc:
            print(f"trainsleuth serve: {exc}", file=sys.stderr)
            return 2
    config = ServerConfig(
        workspaces=workspaces,
        state_path=Path(args.state) if args.state else None,
        elicitation_only=args.elicitation_only,
        allowed_interpreters=[Path(p) for p in args.allow_python],
    )
    server, _ = build_server(config)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        serve_http(server, args.host, args.port, token, args.allow_host)
    return 0

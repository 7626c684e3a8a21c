"""`trainsleuth install CLIENT`: write or merge the client's own MCP configuration (and hooks)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    from trainsleuth.clients.install import CLIENTS

    p = sub.add_parser(
        "install",
        help="register trainsleuth with an MCP client",
        description="Register trainsleuth with an MCP client: merges the trainsleuth entry into the client's "
        "own config file (keeping every other entry, with a timestamped backup), idempotently. Where the client "
        "has a per-tool permission setting, approve_diagnosis is set to ask the person.",
    )
    p.add_argument("client", choices=CLIENTS, help="the client to configure")
    p.add_argument(
        "--scope",
        choices=["project", "user"],
        default=None,
        help="project (this folder) or user (every project); default: project where the client has it",
    )
    p.add_argument("--dry-run", action="store_true", help="print what would be written, change nothing")
    p.add_argument(
        "--with-hooks",
        action="store_true",
        help="also register the edit gate as a pre-tool hook (claude-code, cursor, windsurf)",
    )
    p.add_argument(
        "--workspace",
        action="append",
        default=None,
        metavar="PATH",
        help="workspace the server may work in (repeatable; default: the project folder)",
    )
    p.add_argument(
        "--project", default=None, metavar="PATH", help="project folder for --scope project (default: cwd)"
    )
    p.add_argument(
        "--python",
        action="append",
        default=None,
        metavar="PATH",
        help="an interpreter the server may run your code with besides those it finds itself (the workspace's "
        ".venv, the active conda env or virtualenv, python on PATH); repeatable",
    )
    p.add_argument(
        "--url",
        default=None,
        help="register a running `trainsleuth serve --transport http` at this URL (with its bearer token) "
        "instead of a server the client starts",
    )
    p.add_argument(
        "--token-file",
        default=None,
        metavar="FILE",
        help="with --url: the token file (default: the one the server made for that address)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trainsleuth.clients.install import InstallError, apply_plan, plan_install

    try:
        plan = plan_install(
            args.client,
            scope=args.scope,
            project=Path(args.project) if args.project else None,
            workspaces=[Path(w) for w in args.workspace] if args.workspace else None,
            with_hooks=args.with_hooks,
            pythons=[Path(p) for p in args.python] if args.python else None,
            url=args.url,
            token_file=Path(args.token_file) if args.token_file else None,
        )
    except InstallError as exc:
        print(f"trainsleuth install: {exc}", file=sys.stderr)
        return 2
    for note in plan.notes:
        print(f"note: {note}")
    if args.dry_run:
        for change in plan.changes:
            state = "would write" if change.changed else "already up to date"
            print(f"--- {change.what}: {change.path} ({state})")
            if change.changed:
                text = change.new_text
                if change.private:  # never print the bearer token
                    text = re.sub(r"Bearer [^\"]+", "Bearer <the server's token>", text)
                print(text, end="")
        print("dry run: nothing was written")
        return 0
    try:
        result = apply_plan(plan)
    except InstallError as exc:
        print(f"trainsleuth install: {exc}", file=sys.stderr)
        return 3
    for path in result.written:
        print(f"wrote {path}")
    for path in result.backups:
        print(f"backup of the previous file: {path}")
    for path in result.unchanged:
        print(f"already up to date: {path}")
    print(f"trainsleuth is registered with {args.client}; restart the client (or reload its MCP servers).")
    return 0

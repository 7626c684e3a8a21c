"""`trainsleuth install CLIENT`: write or merge the client's own MCP configuration (and hooks)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    from trainsleuth.clients.install import CLIENTS

    p = sub.add_parser(
        "install",
        help="register trainsleuth with an MCP client",
        description="Register trainsleuth with an MCP client: merges the trainsleuth entry into the client's "
        "own config file (keeping every other entry, with a timestamped backup), idempotently.",
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
        help="also register the edit gate as a pre-tool hook (claude-code, cursor)",
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
                print(change.new_text, end="")
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

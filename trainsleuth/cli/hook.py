"""`trainsleuth hook CLIENT`: the edit gate run by a client's pre-tool hook (JSON on stdin)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "hook",
        help="edit gate for clients' pre-tool hooks",
        description="Edit gate for a client's pre-tool hook: reads the hook input JSON on stdin and denies "
        "edits of non-test files while an investigation has no approved diagnosis (or is halted). "
        "Registered by `trainsleuth install CLIENT --with-hooks`. Fails closed on its own errors.",
    )
    p.add_argument(
        "client", choices=["claude-code", "cursor", "windsurf"], help="whose hook format to read and write"
    )
    p.add_argument(
        "--workspace",
        default=None,
        metavar="PATH",
        help="workspace whose investigations gate edits (default: nearest folder with .trainsleuth/ above "
        "the edited file, else the hook's cwd)",
    )
    p.add_argument(
        "--state",
        default=None,
        metavar="PATH",
        help="state database (default: per-user, outside the workspace; see `trainsleuth state show`)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trainsleuth.clients.hooks import run_hook

    try:
        text = sys.stdin.read()
    except Exception as exc:  # fail closed: unreadable input
        text = f"<unreadable stdin: {exc}>"
    outcome = run_hook(
        args.client,
        text,
        workspace=Path(args.workspace).absolute() if args.workspace else None,
        state_path=Path(args.state).absolute() if args.state else None,
    )
    if outcome.stdout:
        sys.stdout.write(outcome.stdout)
        sys.stdout.flush()
    if outcome.stderr:
        sys.stderr.write(outcome.stderr)
        sys.stderr.flush()
    return outcome.exit_code

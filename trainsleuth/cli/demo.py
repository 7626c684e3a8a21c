"""`trainsleuth demo` (issue 9): wired when its capability lands."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="the whole protocol end to end on a bundled example",
        description="demo: the whole protocol end to end on a bundled example",
    )
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trainsleuth.cli import not_available

    return not_available("demo", 9)

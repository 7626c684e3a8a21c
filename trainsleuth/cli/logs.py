"""`trainsleuth logs` (issue 4): wired when its capability lands."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "logs",
        help="analyse a training log or run folder",
        description="logs analyze|extract PATH: analyse a training log or run folder",
    )
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trainsleuth.cli import not_available

    return not_available("logs", 4)

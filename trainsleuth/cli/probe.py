"""`trainsleuth probe` (issue 5): wired when its capability lands."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "probe",
        help="run a model for a few steps and report gradient findings",
        description="probe ENTRYPOINT: run a model for a few steps and report gradient findings",
    )
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trainsleuth.cli import not_available

    return not_available("probe", 5)

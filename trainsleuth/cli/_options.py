"""Options shared by several subcommands, so they mean the same everywhere."""

from __future__ import annotations

import argparse

# `--fail-on LEVEL`: exit 1 when a finding or event at or above LEVEL is reported; `never` disables.
FAIL_ON_CHOICES = ("info", "warning", "error", "never")


def add_fail_on(parser: argparse.ArgumentParser, default: str = "never") -> None:
    parser.add_argument(
        "--fail-on",
        choices=FAIL_ON_CHOICES,
        default=default,
        metavar="LEVEL",
        help="exit 1 if a finding or event at or above LEVEL (info, warning, error) is reported; "
        "never (the default) disables it",
    )


def fail_level(value: str | None) -> str | None:
    """The level to check, or None for `never` / not given."""
    return None if value in (None, "never") else value

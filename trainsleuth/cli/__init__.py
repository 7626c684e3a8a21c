"""The `trainsleuth` command line. Each subcommand lives in its own module with `add_parser`.

Imports stay light: a subcommand imports what it needs only when it runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from trainsleuth import __version__
from trainsleuth.cli import client, compare, demo, hook, install, logs, probe, serve, state, trace

COMMANDS = (serve, probe, logs, compare, trace, client, install, hook, demo, state)

EXIT_OK = 0
EXIT_EXPECTATION = 1  # an expectation or --fail-on threshold was not met
EXIT_USAGE = 2
EXIT_ERROR = 3  # the server, the tool or the analysis itself failed
EXIT_SIGPIPE = 141  # the output's reader closed the pipe (128 + SIGPIPE), as shells report it


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainsleuth",
        description="Debug machine-learning training: root cause first, evidence before conclusions, "
        "one change at a time, and a hard stop after three failed fixes.",
    )
    parser.add_argument("--version", action="version", version=f"trainsleuth {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


# subcommands that take the user's own command after `--` (`trainsleuth probe -- python train.py ...`)
TAKES_COMMAND = ("probe",)


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """`probe --steps 4 -- python train.py --lr 1` -> (['probe', '--steps', '4'], ['python', 'train.py', '--lr', '1'])."""
    argv = list(argv)
    if "--" not in argv or not argv or argv[0] not in TAKES_COMMAND:
        return argv, None
    i = argv.index("--")
    return argv[:i], argv[i + 1 :]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    own, user_command = split_command(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(own)
    if user_command is not None:
        args.user_command = user_command
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`trainsleuth ... | head`): stop quietly, like a tool killed by SIGPIPE.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_SIGPIPE


def not_available(command: str, issue: int) -> int:
    print(
        f"trainsleuth {command}: not available yet in this version (planned in issue {issue}).",
        file=sys.stderr,
    )
    return EXIT_USAGE

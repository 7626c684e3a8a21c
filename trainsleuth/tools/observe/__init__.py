"""Observe the user's own training command (issue 26): the server side of `runners/_ts_observe.py`.

`run_observed(command, ...)` runs the command in a scratch copy of the workspace with the observer in
every Python process it starts and returns one report per process. The probe, distributed, precision
and trace checks are plugins of that one observer (`runners/_ts_observe_<name>.py`).
"""

from trainsleuth.tools.observe.command import CommandError, ObservedCommand, parse_command
from trainsleuth.tools.observe.run import (
    ObservedRun,
    ObserveError,
    read_progress,
    read_reports,
    require_training,
    run_observed,
)

__all__ = [
    "CommandError",
    "ObserveError",
    "ObservedCommand",
    "ObservedRun",
    "parse_command",
    "read_progress",
    "read_reports",
    "require_training",
    "run_observed",
]

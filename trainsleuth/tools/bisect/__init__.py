"""Bisect across commits (git worktrees) and across dependency versions (uv environments).

Plain library code, usable and tested without MCP; the server wraps it in background jobs
(`trainsleuth.tools.jobs`). git and uv run as commands; uv comes with the `[bisect]` extra.
"""

from __future__ import annotations

from trainsleuth.tools.bisect.commits import CommitBisectPlan, prepare_commit_bisect, run_commit_bisect
from trainsleuth.tools.bisect.common import BisectError, LocalReporter, Reporter

__all__ = [
    "BisectError",
    "CommitBisectPlan",
    "LocalReporter",
    "Reporter",
    "prepare_commit_bisect",
    "run_commit_bisect",
]

"""Differential trace (issue 29): run two variants of a training under the tracer
(`runners/_ts_observe_trace.py`) and report the first call or tensor that differs beyond noise."""

from trainsleuth.tools.trace.models import Difference, InvariantBreak, TraceDiffReport
from trainsleuth.tools.trace.report import render_text
from trainsleuth.tools.trace.run import Reporter, TraceDiffError, TracePlan, plan_trace_diff, run_trace_diff

__all__ = [
    "Difference",
    "InvariantBreak",
    "Reporter",
    "TraceDiffError",
    "TraceDiffReport",
    "TracePlan",
    "plan_trace_diff",
    "render_text",
    "run_trace_diff",
]

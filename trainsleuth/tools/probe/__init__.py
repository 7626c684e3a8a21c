"""Gradient probe (issue 5), server side: launch the standalone runner, turn its JSON into findings.

The model never runs in this process: `run_probe` launches `tools/runners/probe_runner.py` in the
user's interpreter. `read_probe_run` reads what `trainsleuth.probe.attach` wrote in a training loop.
"""

from __future__ import annotations

from trainsleuth.tools.probe.live import LiveRunReport, read_probe_run
from trainsleuth.tools.probe.report import ProbeError, ProbeReport, run_probe

__all__ = ["LiveRunReport", "ProbeError", "ProbeReport", "read_probe_run", "run_probe"]

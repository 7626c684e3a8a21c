"""Training-log analysis (issue 4): parse every common log format into metric series, detect
anomalies (findings.md log codes), extract error lines, downsample with extremes kept, plot.

Plain library, no MCP imports; numpy/matplotlib/tensorboard are imported lazily.
"""

from __future__ import annotations

from trainsleuth.tools.logs.analyze import LogReport, analyze, collect
from trainsleuth.tools.logs.extract import ExtractResult, extract
from trainsleuth.tools.logs.readers import FORMATS, LogInputError

__all__ = ["FORMATS", "ExtractResult", "LogInputError", "LogReport", "analyze", "collect", "extract"]

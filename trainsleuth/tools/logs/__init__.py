"""Training-log analysis (issue 4): parse every common log format into metric series, detect
anomalies (findings.md log codes), extract error lines, downsample with extremes kept, plot.

Plain library, no MCP imports; numpy/matplotlib/tensorboard are imported lazily, and so are this
package's own modules: reading a log (`collect`) does not import pydantic.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# imported here, not lazily: the submodule `collect` would otherwise shadow the function
from trainsleuth.tools.logs.readers import FORMATS, LogInputError, collect

if TYPE_CHECKING:
    from trainsleuth.tools.logs.analyze import LogReport, analyze
    from trainsleuth.tools.logs.extract import ExtractResult, extract

_WHERE = {
    "LogReport": "analyze",
    "analyze": "analyze",
    "ExtractResult": "extract",
    "extract": "extract",
}

__all__ = ["FORMATS", "ExtractResult", "LogInputError", "LogReport", "analyze", "collect", "extract"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value

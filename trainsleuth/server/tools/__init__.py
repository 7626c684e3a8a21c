"""One module per product area; each exposes `register(registry)`.

Areas whose capability has not landed register placeholders that validate their arguments
and answer "not available yet", so nothing pretends to work.
"""

from __future__ import annotations

from trainsleuth.server.registry import ToolRegistry
from trainsleuth.server.tools import bisect, compare, distributed, knowledge, logs, probe, protocol, trace

AREAS = (protocol, logs, probe, distributed, bisect, knowledge, compare, trace)


def register_all(registry: ToolRegistry) -> None:
    for area in AREAS:
        area.register(registry)

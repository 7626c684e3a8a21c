"""The collector: metric series by name, bounded in number and in points per series, plus what
the parse report needs: where each record's step came from and the unit each metric carried."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from trainsleuth.tools.logs.roles import role_of
from trainsleuth.tools.logs.series import DEFAULT_CAPACITY, Series

MAX_SERIES = 500
LAST_STEP = "the last step logged before the record"
POSITION = "record position (the log has no step numbers)"


class Collector:
    def __init__(self, capacity: int = DEFAULT_CAPACITY, wanted: set[str] | None = None) -> None:
        self.capacity = capacity
        self.series: dict[str, Series] = {}
        self.records = 0
        self.dropped_series: set[str] = set()
        self.last_step: float | None = None
        self.wanted = wanted  # only keep these names (extract_metrics), None keeps all
        self.position_steps = False
        self.step_sources: Counter[str] = Counter()  # records by where their step came from
        self.units: dict[str, str] = {}  # metric name as in the log -> its unit

    def step_for(self, step: float | None, source: str, count: int = 1) -> tuple[float, bool]:
        """The step a record is filed under, and whether it is only its position in the log.
        A record without a step takes the last step seen; before any, its position."""
        if step is None or not math.isfinite(step):
            if self.last_step is not None:
                self.step_sources[LAST_STEP] += count
                return self.last_step, False
            self.step_sources[POSITION] += count
            return float(self.records), True
        self.step_sources[source or "the record's own step"] += count
        self.last_step = step
        return step, False

    def add(self, step: float | None, metrics: dict[str, float], prefix: str = "", source: str = "") -> None:
        self.records += 1
        step, positional = self.step_for(step, source)
        series = self.series
        for base, value in metrics.items():
            name = prefix + base if prefix else base
            s = series.get(name)
            if s is None:
                # a run folder prefix ("eval/") says what the metric is; a file prefix ("rank0.log:") does not
                s = self._new(name, name if prefix.endswith("/") else base)
                if s is None:
                    continue
            if positional:
                s.step_from_position = True
                self.position_steps = True
            s.add(step, value)

    def add_columns(self, name: str, base: str, steps: Any, values: Any, *, positional: bool = False,
                    run_prefix: bool = False) -> None:  # fmt: skip
        """A whole column of one metric (numpy arrays), from the block fast path."""
        s = self.series.get(name)
        if s is None:
            s = self._new(name, name if run_prefix else base)
            if s is None:
                return
        if positional:
            s.step_from_position = True
            self.position_steps = True
        s.add_many(steps, values)

    def _new(self, name: str, base: str | None = None) -> Series | None:
        if self.wanted is not None and name not in self.wanted:
            return None
        if len(self.series) >= MAX_SERIES:
            if len(self.dropped_series) < 50:
                self.dropped_series.add(name)
            return None
        s = Series(name, role_of(base or name), self.capacity)
        self.series[name] = s
        return s

    def finish(self) -> None:
        for s in self.series.values():
            s.finish()

"""The learning-rate schedule: a run that ends while its learning rate is still warming up in steps.

A per-step schedule stepped once per epoch is invisible in the loss (it falls, only slowly) but plain
in the lr column: the rate rises through the whole log, is still rising at its last records, and
rises in steps held across several records (it is stepped less often than it is logged). Measured
against the series itself: its first value, where it ends, how often and by how much it changes.
A per-step warmup logged before it finishes (an excerpt of a healthy run) rises at every record, or
repeats a value only by its printed rounding (small steps between repeats): it stays quiet.
"""

from __future__ import annotations

import itertools
from statistics import median

from trainsleuth.tools.findings import Finding
from trainsleuth.tools.logs.detect.common import as_step, finding, r6, timeline
from trainsleuth.tools.logs.series import Series

MIN_POINTS = 8  # lr records needed to speak of a schedule
MIN_RISE = 3.0  # the last value at least this many times the first
LAST_RISE_WITHIN = 0.25  # the last increase within this final fraction of the records
REL_EPS = 1e-6  # printed rounding: a smaller relative change is no change
HELD = 0.6  # at most this fraction of consecutive records change: levels are held across records
MIN_JUMP = 0.05  # the median change at least this relative step (a printed digit's rounding is far less)


def detect_unfinished_warmup(s: Series) -> Finding | None:
    if s.role != "lr" or s.width > 1 or len(s.segments) > 1:
        return None
    steps, vals, _ = timeline(s)
    n = len(vals)
    if n < MIN_POINTS or vals[0] <= 0:
        return None
    rises = [i for i in range(1, n) if vals[i] > vals[i - 1] * (1 + REL_EPS)]
    if any(vals[i] < vals[i - 1] * (1 - REL_EPS) for i in range(1, n)):
        return None  # it decays somewhere: the warmup finished (or the schedule is cyclic)
    if not rises or vals[-1] < MIN_RISE * vals[0] or rises[-1] < n * (1 - LAST_RISE_WITHIN):
        return None  # not rising much, or rising then held (a warmup into a constant rate)
    changes = len(rises)
    if changes > HELD * (n - 1):
        return None  # it changes at (nearly) every record: a per-step schedule, still warming up
    jumps = [vals[i] / vals[i - 1] - 1 for i in rises]
    if median(jumps) < MIN_JUMP:
        return None  # small steps between repeats: a value's printed rounding, not held levels
    gaps = [steps[b] - steps[a] for a, b in itertools.pairwise(rises)]
    every = median(gaps) if gaps else None
    return finding(
        "lr_warmup_unfinished",
        "warning",
        f"{s.name} rises from {r6(vals[0])} to {r6(vals[-1])} over the whole log (steps {as_step(steps[0])}-"
        f"{as_step(steps[-1])}) and is still rising at its last records: if the run ended here, it never "
        f"left its warmup and trained at a fraction of its peak rate. It rises in steps held across records, "
        f"{changes} changes in {n} records"
        + (f" (every {as_step(every)} steps)" if every else "")
        + ": the schedule is stepped less often than the optimizer (a per-step warmup stepped once per "
        "epoch?) or its warmup is longer than the run.",
        step=steps[rises[-1]],
        metric=s.name,
        first_value=r6(vals[0]),
        last_value=r6(vals[-1]),
        records=n,
        changes=changes,
        steps_per_change=r6(every) if every else None,
        first_step=as_step(steps[0]),
        last_step=as_step(steps[-1]),
    )

"""The labelled fault benchmark: broken and healthy training set-ups and logs, scored through the CLI.

`python -m benchmarks.faults` runs it and writes the table into docs/benchmarks.md; `run_benchmark()`
is the entry `python -m benchmarks` uses (see benchmarks/common.py).
"""

from __future__ import annotations

from benchmarks.common import BenchResult


def run_benchmark(quick: bool = False) -> list[BenchResult]:
    from benchmarks.common import result
    from benchmarks.faults.harness import run_all, score
    from benchmarks.faults.manifest import load_manifest

    manifest = load_manifest()
    cases = manifest.cases
    if quick:  # every code once is not guaranteed; quick keeps every third case
        cases = cases[::3]
    runs = run_all(cases)
    if all(not r.ok for r in runs.values()):
        first = next(iter(runs.values()))
        raise RuntimeError(f"no case could run through the CLI: {first.error}")
    s = score(cases, runs)
    cmd = "python -m benchmarks.faults"
    fa_rate = len(s.false_alarms) / s.healthy_total if s.healthy_total else None
    return [
        result(
            "fault recall (all labelled codes)",
            s.recall,
            "best published detector ~0.55 recall (independent 2025 comparison)",
            0.95,
            unit="recall",
            details=f"{s.detected}/{s.labels} labels; {len(s.failed_runs)} case(s) failed to run",
            command=cmd,
        ),
        result(
            "healthy cases with a warning or error",
            fa_rate,
            "AUTOTRAINER flagged 15 of 15 healthy runs in a replication",
            0.0,
            direction="lower",
            unit="share",
            details=f"{len(s.false_alarms)}/{s.healthy_total} healthy cases",
            command=cmd,
        ),
        result(
            "origin localisation",
            s.origin_accuracy,
            "no published figure; goal from issue 10",
            0.9,
            unit="accuracy",
            details=f"{s.origin_right}/{s.origin_total} labelled origins",
            command=cmd,
        ),
    ]

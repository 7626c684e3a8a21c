"""Bisect: test runs versus `git bisect run`, and cached environments versus building them.

1. Runs: on generated histories (linear and with merges, 200 to 1000 commits, bugs early, middle
   and late), bisect_commits' bisection runs divided by the runs real `git bisect run` needs on a
   clone of the same history; both must name the same commit. Goal: at most 1.0. Like for like:
   git trusts the endpoints, so the endpoint checks bisect_commits adds by default in two edge
   cases (no candidate passed: test good once; none failed: test bad once) are reported apart.
2. Env reuse: bisect_versions over 10 versions of a local package (hand-written wheels of 200
   modules each, plus 3 base requirements, served offline with --find-links --no-index): the
   first bisect builds every environment (empty environment cache and empty uv cache), a second
   bisect over the same versions reuses them. The figure is first / second (median over
   interleaved repetitions). Goal: at least 5x faster.

    python -m benchmarks.bisect [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import BenchResult, result

RUNS_GOAL = 1.0
REUSE_GOAL = 5.0
COMMAND = "python -m benchmarks.bisect"


def _git_bisect_runs(src: Path, good: str, bad: str, command: str, tmp: Path) -> tuple[str | None, int]:
    clone = tmp / "clone"
    subprocess.run(["git", "clone", "-q", str(src), str(clone)], check=True)
    counter = tmp / "count"
    subprocess.run(["git", "-C", str(clone), "bisect", "start", bad, good], check=True, capture_output=True)
    run = subprocess.run(
        ["git", "-C", str(clone), "bisect", "run", "sh", "-c", f"echo x >> {counter}; {command}"],
        capture_output=True,
        text=True,
        cwd=clone,
        check=False,
    )
    first = next((ln.split()[0] for ln in run.stdout.splitlines() if "is the first bad commit" in ln), None)
    runs = len(counter.read_text().splitlines()) if counter.exists() else 0
    return first, runs


def bench_runs(quick: bool) -> BenchResult:
    from trainsleuth.tools.bisect.commits import prepare_commit_bisect, run_commit_bisect
    from trainsleuth.tools.bisect.common import LocalReporter
    from trainsleuth.tools.bisect.testing import make_history

    cases = [(200, 37, 0), (200, 150, 5), (500, 251, 0), (1000, 999, 0), (1000, 2, 7)]
    if quick:
        cases = cases[:2]
    ours_total = git_total = checks = 0
    rows = []
    for n, bug_at, merge_every in cases:
        with tempfile.TemporaryDirectory(prefix="ts-bench-bisect-") as tmp_s:
            tmp = Path(tmp_s)
            history = make_history(tmp / "repo", n, bug_at, merge_every=merge_every)
            plan = prepare_commit_bisect(history.path, history.good, history.bad, "test ! -f bug")
            ours = run_commit_bisect(plan, LocalReporter())
            git_first, git_runs = _git_bisect_runs(
                history.path, history.good, history.bad, "test ! -f bug", tmp
            )
            if ours["first_bad_commit"]["hash"] != git_first or git_first != history.bug_commit:
                raise RuntimeError(f"disagreement with git bisect on history n={n} bug_at={bug_at}")
            ours_total += ours["bisect_runs"]
            checks += ours["verification_runs"]
            git_total += git_runs
            extra = f" (+{ours['verification_runs']} endpoint check)" if ours["verification_runs"] else ""
            rows.append(
                f"{n}c/bug@{bug_at}{'/merges' if merge_every else ''}: {ours['bisect_runs']}{extra} vs {git_runs}"
            )
    return result(
        "bisect_commits test runs vs git bisect run",
        ours_total / git_total,
        f"real `git bisect run` on a clone of each history ({git_total} runs in all)",
        RUNS_GOAL,
        direction="lower",
        unit="x runs",
        details="; ".join(rows)
        + f" (ours vs git); same first bad commit every time; {checks} endpoint check(s) in all",
        command=COMMAND,
    )


def _make_wheels(directory: Path, versions: list[str]) -> None:
    from trainsleuth.tools.bisect.wheels import build_wheel

    modules = {f"tsbench/mod{i:03d}.py": f"VALUE = {i}\n" + "# padding\n" * 40 for i in range(200)}
    for v in versions:
        bug = int(v.split(".")[1]) >= 6
        build_wheel(directory, "tsbench", v, {**modules, "tsbench/__init__.py": f"BUG = {bug}\n"})
    for dep in ("tsdep-a", "tsdep-b", "tsdep-c"):
        pkg = dep.replace("-", "_")
        files = {f"{pkg}/m{i:03d}.py": "X = 1\n" * 20 for i in range(100)}
        build_wheel(directory, dep, "1.0", {**files, f"{pkg}/__init__.py": ""})


def bench_env_reuse(quick: bool) -> BenchResult:
    from trainsleuth.tools.bisect.common import LocalReporter
    from trainsleuth.tools.bisect.uvenv import default_python
    from trainsleuth.tools.bisect.versions import prepare_version_bisect, run_version_bisect

    versions = [f"1.{i}" for i in range(10)]
    repeats = 1 if quick else 3
    cold: list[float] = []
    warm: list[float] = []
    tried = 0
    with tempfile.TemporaryDirectory(prefix="ts-bench-versions-") as tmp_s:
        tmp = Path(tmp_s)
        wheels = tmp / "wheels"
        _make_wheels(wheels, versions)
        saved = {k: os.environ.get(k) for k in ("UV_OFFLINE", "UV_PYTHON_DOWNLOADS", "UV_CACHE_DIR")}
        os.environ["UV_OFFLINE"] = "1"
        os.environ["UV_PYTHON_DOWNLOADS"] = "never"
        try:
            for rep in range(repeats):
                envs = tmp / f"envs-{rep}"
                os.environ["UV_CACHE_DIR"] = str(tmp / f"uv-cache-{rep}")
                timings = []
                answers = []
                for _ in range(2):  # first: builds everything; second: reuses
                    t0 = time.perf_counter()
                    plan = prepare_version_bisect(
                        "tsbench",
                        versions,
                        "python -c 'import sys, tsbench, tsdep_a, tsdep_b, tsdep_c; sys.exit(int(tsbench.BUG))'",
                        cwd=tmp,
                        cache_dir=envs,
                        python=default_python(),
                        requirements=["tsdep-a", "tsdep-b", "tsdep-c"],
                        find_links=[str(wheels)],
                        no_index=True,
                    )
                    out = run_version_bisect(plan, LocalReporter())
                    timings.append(time.perf_counter() - t0)
                    answers.append(out["first_bad_version"])
                if answers != ["1.6", "1.6"]:
                    raise RuntimeError(f"bisect_versions answered {answers}, expected 1.6 twice")
                tried = len(out["versions_tried"])
                cold.append(timings[0])
                warm.append(timings[1])
                shutil.rmtree(envs, ignore_errors=True)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    c, w = statistics.median(cold), statistics.median(warm)
    tried_note = f"{tried} environments built, then reused"
    return result(
        "bisect_versions second run (cached envs) vs first run",
        c / w,
        f"the first bisect over the same 10 versions, building every environment ({c:.2f} s median)",
        REUSE_GOAL,
        unit="x faster",
        details=f"second bisect {w:.2f} s vs first {c:.2f} s (median of {repeats}); {tried_note}",
        command=COMMAND,
    )


def run_benchmark(quick: bool = False) -> list[BenchResult]:
    return [bench_runs(quick), bench_env_reuse(quick)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    records: list[Any] = run_benchmark(args.quick)
    print(json.dumps(records, indent=2))


if __name__ == "__main__":
    main()

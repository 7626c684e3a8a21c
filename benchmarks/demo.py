"""`trainsleuth demo` wall time: against the issue's 60 s budget, and against the same analyses run directly.

The baseline does the demo's heavy work without MCP and without the protocol, as separate CLI commands
on a scratch copy of the example: analyse the log with a plot, probe the failing batch, inspect the
batch, apply the fix and run the reproducer. Candidate and baseline alternate, so machine noise hits
both; figures are medians.

    python -m benchmarks.demo [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import BenchResult, result

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "demo"
BUDGET_S = 60.0
OVERHEAD_GOAL = 2.0
COMMAND = "python -m benchmarks.demo"


def _trainsleuth() -> str:
    return str(Path(sys.executable).parent / "trainsleuth")


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_demo_once() -> tuple[float, float]:
    """(wall seconds, CPU seconds of the demo's whole process tree: client, server, its children)."""
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as tmp:
        cpu0 = _children_cpu()
        start = time.perf_counter()
        proc = subprocess.run(
            [_trainsleuth(), "demo", "--out", str(Path(tmp) / "out")], capture_output=True, text=True
        )
        elapsed = time.perf_counter() - start
        cpu = _children_cpu() - cpu0
        if proc.returncode != 0:
            raise RuntimeError(f"trainsleuth demo failed: {proc.stderr[-2000:]}")
        return elapsed, cpu


def run_direct_once() -> float:
    """The same analyses as plain commands, no MCP server, no protocol."""
    with tempfile.TemporaryDirectory(prefix="bench-direct-") as tmp:
        ws = Path(tmp) / "ws"
        shutil.copytree(EXAMPLE, ws)
        ts = _trainsleuth()
        batch_check = (
            "import torch; from train import make_batch; x,_ = make_batch(40); "
            "print(int((x.abs().sum(-1) == 0).sum()), bool(torch.isfinite(x).all()))"
        )
        start = time.perf_counter()
        subprocess.run(
            [ts, "logs", "analyze", "train.log", "--plot", "plot.png"], cwd=ws, capture_output=True
        )
        subprocess.run([ts, "probe", "train.py:probe_epoch_end", "--steps", "2"], cwd=ws, capture_output=True)
        subprocess.run([sys.executable, "-c", batch_check], cwd=ws, capture_output=True, check=True)
        shutil.copy2(ws / "fix" / "model.py", ws / "model.py")
        subprocess.run([sys.executable, "train.py", "--steps", "45"], cwd=ws, capture_output=True, check=True)
        return time.perf_counter() - start


def run_benchmark(quick: bool = False, runs: int | None = None) -> list[BenchResult]:
    n = runs or (1 if quick else 2)
    demo: list[float] = []
    cpu: list[float] = []
    direct: list[float] = []
    for _ in range(n):
        wall, used = run_demo_once()
        demo.append(wall)
        cpu.append(used)
        direct.append(run_direct_once())
    d, b, c = statistics.median(demo), statistics.median(direct), statistics.median(cpu)
    details = f"median of {n}: demo {d:.1f} s wall ({c:.1f} s CPU), direct commands {b:.1f} s"
    return [
        result(
            "trainsleuth demo CPU time (client, server and every child) vs the 60 s budget",
            c / BUDGET_S,
            f"the issue's budget ({BUDGET_S:.0f} s); the steps run one after another, so on an idle "
            "machine wall time is close to this CPU time",
            1.0,
            direction="lower",
            unit="x budget",
            details=details,
            command=COMMAND,
        ),
        result(
            "trainsleuth demo wall time vs the 60 s budget",
            d / BUDGET_S,
            f"the issue's budget ({BUDGET_S:.0f} s on a 2-core machine)",
            1.0,
            direction="lower",
            unit="x budget",
            details=details,
            command=COMMAND,
        ),
        result(
            "trainsleuth demo (MCP + protocol) vs the same analyses run directly",
            d / b,
            f"log analysis + probe + batch check + reproducer as plain commands ({b:.1f} s)",
            OVERHEAD_GOAL,
            direction="lower",
            unit="x time",
            details=details,
            command=COMMAND,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    print(json.dumps(run_benchmark(runs=args.runs), indent=2))


if __name__ == "__main__":
    main()

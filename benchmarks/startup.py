"""Cold start: spawn the server, initialize, list tools; trainsleuth vs a minimal one-tool server.

Both are run alternately, side by side, so machine noise hits both equally; the figure is the ratio
of medians. Goal: at most 1.3x.

    python -m benchmarks.startup [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import BenchResult, result

GOAL = 1.3
HERE = Path(__file__).resolve().parent

MESSAGES = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]


def time_cold_start(argv: list[str], cwd: Path) -> tuple[float, int]:
    """Seconds from spawn until the tools/list response arrives, and how many tools it listed."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdin and proc.stdout
    proc.stdin.write("".join(json.dumps(m) + "\n" for m in MESSAGES))
    proc.stdin.flush()
    tools = -1
    for line in proc.stdout:
        msg = json.loads(line)
        if msg.get("id") == 2:
            tools = len(msg["result"]["tools"])
            break
    elapsed = time.perf_counter() - start
    proc.stdin.close()
    proc.terminate()
    proc.wait(timeout=10)
    if tools < 0:
        raise RuntimeError(f"{argv[0]} never answered tools/list")
    return elapsed, tools


def measure(runs: int = 15) -> dict[str, Any]:
    trainsleuth = [str(Path(sys.executable).parent / "trainsleuth"), "serve"]
    # Its own folder: run as a script, benchmarks/ would be on sys.path and benchmarks/bisect.py shadows stdlib bisect.
    minimal = [sys.executable, str(HERE / "baseline_servers" / "minimal_server.py")]
    ours: list[float] = []
    base: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        time_cold_start(trainsleuth, cwd)  # warm the OS file cache for both
        time_cold_start(minimal, cwd)
        for _ in range(runs):
            t, n_ours = time_cold_start(trainsleuth, cwd)
            ours.append(t)
            t, n_base = time_cold_start(minimal, cwd)
            base.append(t)
    ratio = statistics.median(ours) / statistics.median(base)
    return {
        "name": "startup",
        "ratio": round(ratio, 3),
        "baseline": "minimal one-tool MCPServer on the same SDK",
        "goal": f"<= {GOAL}x",
        "met": ratio <= GOAL,
        "details": {
            "runs": runs,
            "trainsleuth_median_s": round(statistics.median(ours), 4),
            "minimal_median_s": round(statistics.median(base), 4),
            "trainsleuth_tools": n_ours,
            "minimal_tools": n_base,
        },
    }


def run_benchmark(quick: bool = False) -> BenchResult:
    """The `python -m benchmarks` entry point (see benchmarks/common.py)."""
    runs = 5 if quick else 15
    m = measure(runs)
    d = m["details"]
    return result(
        "cold start (spawn, initialize, list tools) vs minimal one-tool server",
        m["ratio"],
        f"minimal MCPServer, median {d['minimal_median_s']}s",
        GOAL,
        direction="lower",
        unit="x time",
        details=f"trainsleuth median {d['trainsleuth_median_s']}s ({d['trainsleuth_tools']} tools), {runs} runs each",
        command=f"python -m benchmarks.startup --runs {runs}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    print(json.dumps(measure(args.runs), indent=2))


if __name__ == "__main__":
    main()

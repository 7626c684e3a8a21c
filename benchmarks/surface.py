"""What a client pays for trainsleuth before and while using it (issue 18).

1. tools/list size: characters of the whole list as sent on the wire (compact JSON), the largest
   tool, and the same list pretty-printed the way issue 18 measured its 119,000 characters.
   Goal: <= 18,500 on the wire (issue 18 asked 20,000); the ratio is the size against that budget.
2. `trainsleuth client call list_investigations` against a bare SDK client doing the same call
   (`benchmarks/baseline_clients/sdk_call.py`: `mcp.Client` spawning `trainsleuth serve`), run
   alternately, side by side. Wall time and CPU time (the client and the server it starts) are
   both reported; CPU is what a quiet machine's wall time would be, since each process is
   single-threaded. Goal: ratio <= 1.0 (no slower than the bare client) and <= 1.5 s absolute.
3. With `--install-size`: build the wheel, install it into a fresh venv (uv, network or uv cache)
   and measure the venv. Goal: <= 150 MB for the core install.

    python -m benchmarks.surface [--runs 9] [--install-size]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import BenchResult, result

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BUDGET = 18_500
CALL_GOAL_S = 1.5
SIZE_GOAL_MB = 150.0


def tools_list_size() -> dict[str, Any]:
    import anyio
    from mcp import Client
    from mcp_types import ListToolsResult

    from trainsleuth.server.app import build_server
    from trainsleuth.server.context import ServerConfig

    async def main() -> list[Any]:
        with tempfile.TemporaryDirectory() as tmp:
            server, _ = build_server(ServerConfig(workspaces=[Path(tmp)]))
            async with Client(server) as client:
                return list((await client.list_tools()).tools)

    tools = anyio.run(main)
    wire = ListToolsResult(tools=tools).model_dump_json(by_alias=True, exclude_none=True)
    sizes = {t.name: len(t.model_dump_json(by_alias=True, exclude_none=True)) for t in tools}
    pretty = json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools])
    largest = max(sizes, key=lambda n: sizes[n])
    return {
        "wire": len(wire),
        "pretty": len(pretty),
        "tools": len(tools),
        "largest": (largest, sizes[largest]),
    }


def _timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (this child and its children, i.e. the server) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} failed: {proc.stderr[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def call_latency(runs: int) -> dict[str, Any]:
    trainsleuth = str(Path(sys.executable).parent / "trainsleuth")
    # A server started for the call, as the bare client does (the kept server: benchmarks/client_calls.py).
    ours = [trainsleuth, "client", "call", "list_investigations", "--no-keep"]
    # Run as a script from its own folder: benchmarks/bisect.py would shadow the stdlib on sys.path.
    bare = [sys.executable, str(HERE / "baseline_clients" / "sdk_call.py"), trainsleuth]
    walls: dict[str, list[float]] = {"ours": [], "bare": []}
    cpus: dict[str, list[float]] = {"ours": [], "bare": []}
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        _timed(ours, cwd)  # warm the file cache for both
        _timed(bare, cwd)
        for _ in range(runs):
            for key, argv in (("ours", ours), ("bare", bare)):
                wall, cpu = _timed(argv, cwd)
                walls[key].append(wall)
                cpus[key].append(cpu)
    med = {k: statistics.median(v) for k, v in walls.items()}
    cpu = {k: statistics.median(v) for k, v in cpus.items()}
    return {
        "runs": runs,
        "wall_s": {k: round(v, 3) for k, v in med.items()},
        "cpu_s": {k: round(v, 3) for k, v in cpu.items()},
        "ratio_wall": round(med["ours"] / med["bare"], 3),
        "ratio_cpu": round(cpu["ours"] / cpu["bare"], 3),
        "load": os.getloadavg()[0],
    }


def install_size() -> dict[str, Any]:
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    with tempfile.TemporaryDirectory() as tmp:
        dist, venv = Path(tmp) / "dist", Path(tmp) / "venv"
        subprocess.run(
            [uv, "build", "--wheel", "--out-dir", str(dist)], cwd=ROOT, check=True, capture_output=True
        )
        wheel = next(dist.glob("trainsleuth-*.whl"))
        subprocess.run(
            [uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True, capture_output=True
        )
        subprocess.run(
            [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), str(wheel)],
            check=True, capture_output=True,
        )  # fmt: skip
        total = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file() and not f.is_symlink())
        packages = len(list(venv.glob("lib/python*/site-packages/*.dist-info")))
    return {"mb": round(total / 1e6, 1), "packages": packages}


def run_benchmark(
    quick: bool = False, with_install: bool = False, runs: int | None = None
) -> list[BenchResult]:
    """The `python -m benchmarks` entry point (see benchmarks/common.py)."""
    runs = runs or (3 if quick else 9)
    size = tools_list_size()
    out = [
        result(
            f"tools/list size on the wire vs the {BUDGET:,}-character budget",
            round(size["wire"] / BUDGET, 3),
            f"budget {BUDGET} characters",
            1.0,
            direction="lower",
            unit="x budget",
            details=f"{size['wire']} characters for {size['tools']} tools (largest {size['largest'][0]}: "
            f"{size['largest'][1]}); pretty-printed {size['pretty']} (issue 18 measured 119,000 that way)",
            command="python -m benchmarks.surface",
        )
    ]
    lat = call_latency(runs)
    out.append(
        result(
            "client call list_investigations vs a bare SDK client (CPU time, client + server)",
            lat["ratio_cpu"],
            f"mcp.Client over stdio, median CPU {lat['cpu_s']['bare']} s",
            1.0,
            direction="lower",
            unit="x CPU time",
            details=f"trainsleuth median CPU {lat['cpu_s']['ours']} s (goal <= {CALL_GOAL_S} s), wall "
            f"{lat['wall_s']['ours']} s vs {lat['wall_s']['bare']} s (ratio {lat['ratio_wall']}), "
            f"{runs} runs each, load {lat['load']:.1f}",
            command=f"python -m benchmarks.surface --runs {runs}",
        )
    )
    if with_install:
        inst = install_size()
        out.append(
            result(
                "core install (wheel into a fresh venv) vs the 150 MB goal",
                round(inst["mb"] / SIZE_GOAL_MB, 3),
                f"goal {SIZE_GOAL_MB:g} MB",
                1.0,
                direction="lower",
                unit="x goal",
                details=f"{inst['mb']} MB, {inst['packages']} distributions",
                command="python -m benchmarks.surface --install-size",
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--install-size", action="store_true")
    args = parser.parse_args()
    for record in run_benchmark(with_install=args.install_size, runs=args.runs):
        print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()

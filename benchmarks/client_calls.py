"""What one `trainsleuth client call` costs: the workspace's kept server against a server per call.

An assistant drives trainsleuth from its shell, one `trainsleuth client call` per step (13-33 per
investigation). Each call used to start a server (the cold start of `benchmarks/startup.py`, plus the
CLI); now the first call starts a server that is kept for the workspace and later calls connect to it
(`trainsleuth/clients/keep.py`). Both are timed side by side, alternating call by call, on the same
workspace with the same protocol call (`list_investigations`, which reads the sealed state):

- kept: `trainsleuth client call list_investigations` with the kept server already running;
- per call: the same with `--no-keep` (a server started for the call, as before);
- first call: stopping the kept server before each run, so the call starts it (what the first call of
  an investigation pays).

Goal: a kept call at most 0.3 s, i.e. far below the per-call figure (the ratio kept / per call is what
is reported, lower is better, goal 0.25).

    python -m benchmarks.client_calls [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import BenchResult, result

COMMAND = "python -m benchmarks.client_calls --runs 15"
GOAL = 0.25
KEPT_BUDGET_S = 0.3
TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir()
    git = ["git", "-C", str(ws), "-c", "user.email=b@example.com", "-c", "user.name=bench"]
    subprocess.run([*git, "init", "-q"], check=True)
    (ws / "train.py").write_text("lr = 10\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "baseline"], check=True)
    return ws


def _call(ws: Path, env: dict[str, str], *extra: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        [TRAINSLEUTH, "client", "call", "list_investigations", "--json", *extra],
        cwd=ws, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"client call failed ({proc.returncode}): {proc.stderr[-500:]}")
    return seconds


def _stop(ws: Path, env: dict[str, str]) -> None:
    subprocess.run(
        [TRAINSLEUTH, "client", "stop", "--workspace", str(ws)], env=env, capture_output=True, timeout=60
    )


def measure(runs: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"kept": [], "per_call": [], "first": []}
    with tempfile.TemporaryDirectory(prefix="client-calls-") as tmp:
        root = Path(tmp)
        ws = _workspace(root)
        env = {**os.environ, "TRAINSLEUTH_STATE_DIR": str(root / "state"), "TRAINSLEUTH_KEEP_SERVER": "1"}
        try:
            _call(ws, env)  # the state and the kept server exist before the first timed run
            for _ in range(runs):
                times["per_call"].append(_call(ws, env, "--no-keep"))
                times["kept"].append(_call(ws, env))
            for _ in range(max(3, runs // 3)):
                _stop(ws, env)
                times["first"].append(_call(ws, env))
        finally:
            _stop(ws, env)
    return times


def run_benchmark(quick: bool = False, runs: int | None = None) -> list[BenchResult]:
    times = measure(runs or (5 if quick else 15))
    kept, per_call, first = (statistics.median(times[k]) for k in ("kept", "per_call", "first"))
    details = (
        f"medians over {len(times['kept'])} alternating runs: kept {kept:.3f} s, per call {per_call:.3f} s, first "
        f"call (starts the kept server) {first:.3f} s over {len(times['first'])} runs; kept <= {KEPT_BUDGET_S} s: "
        f"{'yes' if kept <= KEPT_BUDGET_S else 'NO'}"
    )
    return [
        result(
            "client call on the kept server vs a server per call",
            kept / per_call,
            f"a server started for the call (--no-keep), median {per_call:.2f} s",
            GOAL,
            direction="lower",
            unit="x time",
            details=details,
            command=COMMAND,
        ),
        result(
            "first client call (starts the kept server) vs a server per call",
            first / per_call,
            f"a server started for the call (--no-keep), median {per_call:.2f} s",
            1.5,
            direction="lower",
            unit="x time",
            details=details,
            command=COMMAND,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=15)
    args = p.parse_args(argv)
    for r in run_benchmark(runs=args.runs):
        print(f"{r['name']}: {r['ratio']:.3f}x (goal <= {r['goal']}; {'met' if r['met'] else 'MISSED'})")
        print(f"    {r.get('details', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

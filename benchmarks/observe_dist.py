"""check_distributed on the user's own torchrun command, against the same command run plainly, side by side.

    python -m benchmarks.observe_dist              # 4 rounds, 100 steps
    python -m benchmarks.observe_dist --rounds 10  # more repetitions

The job is `tests/data/observe_dist/bn_allreduce.py`: a healthy 2-rank DDP model (gloo, CPU) whose
BatchNorm all-reduces its statistics in every forward, the case where the old check's own
`all_gather_object` paired with the model's all-reduce and hung 2 runs in 4. Each round runs the plain
`torchrun` and then `check_command` on the same command (every step observed and digested on every
rank), interleaved. Figures: the wall time ratio (medians), and the share of checked runs that ended
healthy with no finding and no hang.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import BenchResult, result

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "data" / "observe_dist" / "bn_allreduce.py"
GOAL_RATIO = 1.3
PY = Path(sys.executable)


def _workspace(tmp: Path) -> Path:
    ws = tmp / "proj"
    ws.mkdir()
    shutil.copy(SCRIPT, ws / SCRIPT.name)
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.email=b@b", "-c", "user.name=b", "commit", "-qm", "i"],
    ):
        subprocess.run(["git", *args], cwd=ws, check=True)
    return ws


def measure(rounds: int = 4, steps: int = 100) -> dict[str, object]:
    from trainsleuth.tools.distributed.observed import check_command
    from trainsleuth.tools.distributed.stacks import find_py_spy

    command = f"torchrun --standalone --nproc_per_node 2 {SCRIPT.name} {steps}"
    env = dict(os.environ, PATH=f"{PY.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    plain: list[float] = []
    checked: list[float] = []
    clean = 0
    with tempfile.TemporaryDirectory(prefix="bench-observe-dist-") as tmp:
        ws = _workspace(Path(tmp))
        for _ in range(rounds):
            t0 = time.perf_counter()
            subprocess.run(command.split(), cwd=ws, env=env, check=True, capture_output=True, timeout=600)
            plain.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            report = check_command(
                command,
                python=PY,
                workspace=ws,
                steps=steps,
                hang_s=60.0,
                timeout_s=600.0,
                py_spy=find_py_spy(),
            )
            checked.append(time.perf_counter() - t0)
            done = all(len(p.steps) == steps for p in report.processes) and len(report.processes) == 2
            clean += int(report.completed and report.healthy and not report.findings and done)
    return {
        "plain": plain,
        "checked": checked,
        "clean": clean,
        "rounds": rounds,
        "steps": steps,
        "command": command,
    }


def run_benchmark(quick: bool = False) -> list[BenchResult]:
    m = measure(rounds=2 if quick else 4, steps=50 if quick else 100)
    plain, checked = m["plain"], m["checked"]
    assert isinstance(plain, list) and isinstance(checked, list)
    ratio = statistics.median(checked) / statistics.median(plain)
    details = (
        f"{m['rounds']} rounds of {m['steps']} steps, interleaved; plain {', '.join(f'{x:.1f}' for x in plain)} s, "
        f"check_distributed {', '.join(f'{x:.1f}' for x in checked)} s (whole call: scratch copy, torchrun, "
        "digests of every tensor on every rank at every step, comparison)"
    )
    cmd = "python -m benchmarks.observe_dist"
    return [
        result(
            "check_distributed command= wall time, 2-rank job with collectives in forward",
            ratio,
            f"the same torchrun command run plainly ({statistics.median(plain):.1f} s median)",
            GOAL_RATIO,
            direction="lower",
            unit="x wall time",
            details=details,
            command=cmd,
        ),
        result(
            "check_distributed command= runs healthy, complete and quiet (no hang)",
            int(m["clean"]) / int(m["rounds"]),  # type: ignore[call-overload]
            f"{m['rounds']} runs of the healthy job",
            1.0,
            unit="share of runs",
            details=f"{m['clean']} of {m['rounds']} runs: every step on both ranks, 0 findings, no hang",
            command=cmd,
        ),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()
    m = measure(args.rounds, args.steps)
    plain, checked = m["plain"], m["checked"]
    assert isinstance(plain, list) and isinstance(checked, list)
    print(f"command: {m['command']}")
    print(f"plain torchrun: {[round(x, 2) for x in plain]} s (median {statistics.median(plain):.2f})")
    print(f"check_distributed: {[round(x, 2) for x in checked]} s (median {statistics.median(checked):.2f})")
    print(f"ratio (medians): {statistics.median(checked) / statistics.median(plain):.3f}")
    print(f"healthy, complete, quiet: {m['clean']} of {m['rounds']}")


if __name__ == "__main__":
    main()

"""Observer overhead (`probe_gradients command=`): a training step under the observer's probe vs a plain step.

The observer lives in the user's process (a `sitecustomize` on PYTHONPATH, `runners/_ts_observe.py`),
so the copies run as separate worker processes, each training an identical model on the same data
with the same thread count, and the harness rotates one step at a time through all of them (every
copy takes every position in turn), so that machine noise hits all alike:

- `plain`: no observer;
- `observed`: the observer with the probe plugin, every measured step inside its window;
- `unobserved`: the observer with the probe plugin, its window never reached (the cost of the
  optimizer and backward hooks it keeps on every step);
- `control`: a second plain copy: the harness's own noise floor.

Each worker times its own step (forward, loss, zero_grad, backward, optimizer step) with
`time.perf_counter` (or `time.process_time` with `--clock cpu`); the figures are ratios of median step
times against `plain`. Goals: observed <= 1.15x, unobserved <= 1.02x. Models: the ResNet-style CNN and
the causal transformer of `benchmarks/probe.py`.

    python -m benchmarks.observe [--steps 48] [--model cnn|transformer|both] [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import BenchResult, result

ROOT = Path(__file__).resolve().parent.parent
GOAL_OBSERVED = 1.15
GOAL_UNOBSERVED = 1.02
WARMUP = 3
COPIES = ("plain", "observed", "unobserved", "control")

WORKER = r"""
import json, sys, time
import torch
from benchmarks.probe import _build, _build_cnn, _loss

kind, clock_name = sys.argv[1], sys.argv[2]
torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
clock = time.process_time if clock_name == "cpu" else time.perf_counter
model, _, data = (_build if kind == "transformer" else _build_cnn)(torch)
if kind == "transformer":
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
else:
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
print(json.dumps({"ready": sum(p.numel() for p in model.parameters())}), flush=True)
for line in sys.stdin:
    if line.strip() != "step":
        break
    t0 = clock()
    loss = _loss(model, data)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    print(json.dumps({"s": clock() - t0}), flush=True)
"""


class Worker:
    def __init__(self, name: str, kind: str, clock: str, tmp: Path, steps: int) -> None:
        from trainsleuth.tools.observe.run import SITE_DIR

        env = dict(os.environ)
        paths = [str(ROOT)]
        if name in ("observed", "unobserved"):
            out = tmp / name
            out.mkdir()
            start = WARMUP + 1 if name == "observed" else 10**6
            config = {
                "out_dir": str(out),
                "plugins": ["probe"],
                "options": {},
                "start": start,
                "steps": steps + 1,
                "stop": False,
            }
            path = tmp / f"{name}.json"
            path.write_text(json.dumps(config), encoding="utf-8")
            env["TRAINSLEUTH_OBSERVE"] = str(path)
            paths.insert(0, str(SITE_DIR))
        env["PYTHONPATH"] = os.pathsep.join(paths)
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, kind, clock],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.params = int(self._read()["ready"])

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"benchmark worker {self.name} ended (exit {self.proc.wait()})")
        return dict(json.loads(line))

    def step(self) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write("step\n")
        self.proc.stdin.flush()
        return float(self._read()["s"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def measure(steps: int = 48, model: str = "cnn", clock: str = "wall") -> dict[str, Any]:
    """Four workers (plain, observed, unobserved, control), one step each in turn, every position in turn."""
    samples: dict[str, list[float]] = {n: [] for n in COPIES}
    with tempfile.TemporaryDirectory() as tmp:
        workers = {n: Worker(n, model, clock, Path(tmp), steps) for n in COPIES}
        try:
            for _ in range(WARMUP):  # iteration 1 (the observer finds the model) and caches warm up
                for w in workers.values():
                    w.step()
            for i in range(steps):
                k = i % len(COPIES)
                for name in COPIES[k:] + COPIES[:k]:
                    samples[name].append(workers[name].step())
        finally:
            for w in workers.values():
                w.close()
        report = sorted((Path(tmp) / "observed").glob("proc-*.json"))
        observed_steps = None
        if report:
            data = json.loads(report[0].read_text(encoding="utf-8"))
            observed_steps = len((data.get("plugins", {}).get("probe") or {}).get("steps") or [])
        params = workers["plain"].params
    med = {k: statistics.median(v) for k, v in samples.items()}
    return {
        "model": model,
        "params": params,
        "clock": clock,
        "steps": steps,
        "median_s": med,
        "ratio_observed": med["observed"] / med["plain"],
        "ratio_unobserved": med["unobserved"] / med["plain"],
        "ratio_control": med["control"] / med["plain"],
        "observed_steps": observed_steps,
    }


DESCRIPTION = {
    "transformer": "causal transformer, batch 4x32 tokens, AdamW",
    "cnn": "ResNet-style CNN with batch norm, batch 32x3x32x32, SGD with momentum",
}


def run_benchmark(quick: bool = False) -> list[BenchResult]:
    out = []
    for kind in ("cnn", "transformer"):
        m = measure(steps=16 if quick else 48, model=kind)
        details = (
            f"{m['params'] / 1e6:.1f}M-param {DESCRIPTION[kind]}; plain median {m['median_s']['plain'] * 1e3:.0f} ms; "
            f"{m['steps']} steps per copy, rotated step by step through 4 worker processes; "
            f"unobserved {m['ratio_unobserved']:.3f}x (goal <= {GOAL_UNOBSERVED}), control {m['ratio_control']:.3f}x"
        )
        cmd = f"python -m benchmarks.observe --model {kind}"
        base = f"plain training steps ({m['median_s']['plain'] * 1e3:.0f} ms median)"
        out.append(
            result(
                f"observer probe overhead ({kind}), observed steps",
                m["ratio_observed"],
                base,
                GOAL_OBSERVED,
                direction="lower",
                unit="x step time",
                details=details,
                command=cmd,
            )
        )
        out.append(
            result(
                f"observer overhead ({kind}), steps outside the window",
                m["ratio_unobserved"],
                base,
                GOAL_UNOBSERVED,
                direction="lower",
                unit="x step time",
                details=details,
                command=cmd,
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=48, help="measured steps per copy")
    ap.add_argument("--model", choices=("transformer", "cnn", "both"), default="both")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="what a step's time is")
    args = ap.parse_args()
    for kind in ("cnn", "transformer") if args.model == "both" else (args.model,):
        m = measure(args.steps, kind, args.clock)
        med = m["median_s"]
        print(
            f"{kind} ({args.clock} time, {m['params'] / 1e6:.1f}M params, {m['steps']} steps, "
            f"{m['observed_steps']} observed by the probe): plain {med['plain'] * 1e3:.1f} ms  "
            f"observed {med['observed'] * 1e3:.1f} ms ({m['ratio_observed']:.3f}x, goal <= {GOAL_OBSERVED})  "
            f"unobserved {med['unobserved'] * 1e3:.1f} ms ({m['ratio_unobserved']:.3f}x, goal <= {GOAL_UNOBSERVED})  "
            f"control {m['ratio_control']:.3f}x"
        )


if __name__ == "__main__":
    main()

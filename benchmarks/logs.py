"""Log-analysis benchmark: throughput and memory, side by side with baselines.

1. A mixed-format training log (Megatron/DeepSpeed records, JSON lines, key=value lines,
   nanoGPT lines, logging chatter, a few warnings and errors) of --size bytes (default 1 GB) is
   generated in a temporary folder (deleted afterwards). `trainsleuth.tools.logs.analyze` runs on
   it in a child process; so does a baseline that applies one generic key/value regex to every
   line and keeps a running min/max per key (the cheapest honest "parse everything" loop).
   Reported: CPU seconds of each child (user + system; wall time on a shared machine mostly
   measures waiting), MB/s, the speed ratio (goal >= 5x) and the analysis child's peak RSS
   (goal < 300 MB).
2. A large numeric CSV (--csv-size bytes, default 200 MB): trainsleuth's CSV reader
   (`trainsleuth.tools.logs.collect`) vs `pandas.read_csv`, each in a fresh interpreter with its
   imports, run alternately --repeat times; best of each on wall time and on CPU seconds
   (goal: at least as fast).

Usage: python -m benchmarks.logs [--size 1G] [--csv-size 200M] [--repeat 1]
`python -m benchmarks logs` runs both with --repeat 3 (--quick: 200 MB log, 50 MB CSV, once).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import BenchResult, result

BASELINE = r"""
import re, sys, time
KV = re.compile(r"([A-Za-z_][\w./ -]*?)\s*[:=]\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
lo, hi = {}, {}
t = time.perf_counter()
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for line in f:
        for m in KV.finditer(line):
            k = m.group(1); v = float(m.group(2))
            if k in hi:
                if v > hi[k]: hi[k] = v
                if v < lo[k]: lo[k] = v
            else:
                lo[k] = hi[k] = v
print(time.perf_counter() - t, len(hi))
"""

OURS = r"""
import sys, time, resource
t = time.perf_counter()
from trainsleuth.tools.logs import analyze
r = analyze(sys.argv[1])
dt = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(dt, len(r.series), len(r.events), rss, r.records)
"""

CSV_OURS = r"""
import sys, time
t = time.perf_counter()
from trainsleuth.tools.logs import collect
c, _, _ = collect(sys.argv[1])
print(time.perf_counter() - t, sum(s.total for s in c.series.values()))
"""

CSV_PANDAS = r"""
import sys, time
t = time.perf_counter()
import pandas as pd
df = pd.read_csv(sys.argv[1])
print(time.perf_counter() - t, int(df.count().sum()))
"""


def parse_size(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text[-1] in mult:
        return int(float(text[:-1]) * mult[text[-1]])
    return int(text)


def make_mixed_log(path: Path, size: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    written = 0
    step = 0
    with open(path, "w") as f:
        while written < size:
            lines = []
            for _ in range(2000):
                step += 1
                loss = 2.0 + 6.0 / (1 + step / 5000) + rng.gauss(0, 0.05)
                if step % 1_000_000 == 500_000:
                    loss += 4.0  # one real spike
                gn = abs(rng.gauss(1.0, 0.2))
                kind = step % 20
                if kind < 8:
                    lines.append(
                        f" iteration {step:9d}/ 50000000 | consumed samples: {step * 512:12d} | elapsed time per "
                        f"iteration (ms): {900 + rng.random() * 50:.1f} | learning rate: {3e-4:.3E} | global batch "
                        f"size:   512 | lm loss: {loss:.6E} | loss scale: 65536.0 | grad norm: {gn:.3f} | num zeros: "
                        f"0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
                    )
                elif kind < 12:
                    lines.append(
                        json.dumps({"step": step, "train": {"loss": round(loss, 5), "grad_norm": round(gn, 4)},
                                    "lr": 3e-4, "tokens_per_sec": round(50000 + rng.random() * 500, 1)}) + "\n"
                    )  # fmt: skip
                elif kind < 16:
                    lines.append(
                        f"step={step} loss={loss:.5f} lr=3.0e-04 gnorm={gn:.4f} ups={3 + rng.random():.3f} "
                        f"wall={step * 0.3:.1f}\n"
                    )
                elif kind < 17:
                    lines.append(
                        f"iter {step}: loss {loss:.4f}, time {90 + rng.random() * 20:.2f}ms, mfu 31.20%\n"
                    )
                elif kind < 19:
                    lines.append(
                        f"[2024-05-01 12:{step % 60:02d}:{step % 59:02d},{step % 1000:03d}] INFO dataloader: prefetched "
                        f"{rng.randint(100, 999)} batches in {rng.random():.2f}s from shard {step % 97}\n"
                    )
                else:
                    lines.append(
                        f"WARNING: slow rank detected on host node-{step % 13} ({rng.random():.3f}s behind)\n"
                    )
            if step % 400_000 < 2000:
                lines.append("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
            chunk = "".join(lines)
            f.write(chunk)
            written += len(chunk)
    return written


def make_csv(path: Path, size: int, seed: int = 1) -> int:
    rng = random.Random(seed)
    written = 0
    step = 0
    with open(path, "w") as f:
        f.write("step,train_loss,val_loss,lr,grad_norm,tokens_per_sec,epoch\n")
        while written < size:
            rows = []
            for _ in range(5000):
                step += 1
                rows.append(
                    f"{step},{2 + 5 / (1 + step / 1e4) + rng.gauss(0, 0.05):.6f},{2.1 + 5 / (1 + step / 1e4):.6f},"
                    f"{3e-4:.6e},{abs(rng.gauss(1, 0.2)):.5f},{50000 + rng.random() * 100:.2f},{step / 1e5:.5f}\n"
                )
            chunk = "".join(rows)
            f.write(chunk)
            written += len(chunk)
    return written


def run_child(code: str, path: Path) -> list[float]:
    """Run one side in a fresh interpreter; returns its printed numbers with the first one (the
    child's own timing) replaced by the child's CPU seconds (user + system), which stay
    meaningful on a shared, busy machine where wall time mostly measures waiting."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = [float(x) for x in proc.stdout.split()]
    return [cpu, *out[1:], out[0]]


def run_benchmark(quick: bool = False) -> list[BenchResult]:
    """The `python -m benchmarks` entry point (see benchmarks/common.py)."""
    size, csv_size, repeat = ("200M", "50M", 1) if quick else ("1G", "200M", 3)
    args = argparse.Namespace(size=size, csv_size=csv_size, repeat=repeat, skip_baseline=False)
    tmp = Path(tempfile.mkdtemp(prefix="ts-bench-logs-"))
    try:
        m = mixed(tmp, args)
        c = csv_compare(tmp, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    cmd = f"python -m benchmarks.logs --size {size} --csv-size {csv_size} --repeat {repeat}"
    mb = m["size"] / 1e6
    csv_results = [
        result(
            f"{c['size'] / 1e6:.0f} MB numeric CSV, {what} with imports",
            c[f"pandas_{key}"] / c[f"ours_{key}"],
            f"pandas.read_csv {c[f'pandas_{key}']:.2f} {unit}",
            1.0,
            unit="x faster" if key == "wall" else "x less CPU",
            details=f"trainsleuth {c[f'ours_{key}']:.2f} {unit}, best of {repeat} alternating runs",
            command=cmd,
        )
        for key, what, unit in (("wall", "wall time", "s"), ("cpu", "CPU seconds", "CPU s"))
    ]
    return [
        result(
            f"log analysis throughput, {mb:.0f} MB mixed-format log (CPU s)",
            m["base_cpu"] / m["ours_cpu"],
            f"one generic key/value regex per line, {mb / m['base_cpu']:.1f} MB/s",
            5.0,
            unit="x faster",
            details=f"trainsleuth {mb / m['ours_cpu']:.1f} MB/s, best of {repeat}",
            command=cmd,
        ),
        result(
            f"peak RSS analysing the {mb:.0f} MB log",
            m["rss_mb"] / 300,
            "the 300 MB budget",
            1.0,
            direction="lower",
            unit="x budget",
            details=f"{m['rss_mb']:.0f} MB",
            command=cmd,
        ),
        *csv_results,
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--size", default="1G", help="size of the mixed-format log (default 1G)")
    ap.add_argument("--csv-size", default="200M", help="size of the CSV (default 200M)")
    ap.add_argument("--repeat", type=int, default=1, help="alternating runs of each side")
    ap.add_argument("--skip-csv", action="store_true", help="only the mixed-format log")
    ap.add_argument("--skip-mixed", action="store_true", help="only the CSV comparison")
    ap.add_argument("--skip-baseline", action="store_true",
                    help="mixed log: measure trainsleuth only (throughput and peak RSS), e.g. at 1G on a slow box")  # fmt: skip
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="ts-bench-logs-"))
    try:
        if not args.skip_mixed:
            mixed(tmp, args)
        if not args.skip_csv:
            csv_compare(tmp, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def mixed(tmp: Path, args: argparse.Namespace) -> dict[str, float]:
    log = tmp / "mixed.log"
    t = time.perf_counter()
    size = make_mixed_log(log, parse_size(args.size))
    print(f"generated {size / 1e6:.0f} MB mixed-format log in {time.perf_counter() - t:.0f}s", flush=True)
    base_t, ours_t, rss = [], [], []
    for _ in range(args.repeat):
        b = [math.nan, 0.0] if args.skip_baseline else run_child(BASELINE, log)
        base_t.append(b[0])
        o = run_child(OURS, log)
        ours_t.append(o[0])
        rss.append(o[3])
        print(f"  baseline {b[0]:.1f} CPU s ({int(b[1])} keys) | trainsleuth {o[0]:.1f} CPU s ({int(o[1])} series, "
              f"{int(o[2])} events, {int(o[4])} records), peak RSS {o[3]:.0f} MB", flush=True)  # fmt: skip
    bt, ot = min(base_t), min(ours_t)
    print(f"mixed log {size / 1e6:.0f} MB: baseline {size / 1e6 / bt:.1f} MB/s, trainsleuth {size / 1e6 / ot:.1f} MB/s "
          f"(CPU), ratio {bt / ot:.2f}x (goal >= 5x); peak RSS {max(rss):.0f} MB (goal < 300 MB)", flush=True)  # fmt: skip
    log.unlink()
    return {"size": size, "base_cpu": bt, "ours_cpu": ot, "rss_mb": max(rss)}


def csv_compare(tmp: Path, args: argparse.Namespace) -> dict[str, float]:
    csv = tmp / "metrics.csv"
    csize = make_csv(csv, parse_size(args.csv_size))
    pt, ct, pw, cw = [], [], [], []
    for _ in range(args.repeat):
        p = run_child(CSV_PANDAS, csv)
        c = run_child(CSV_OURS, csv)
        pt.append(p[0])
        ct.append(c[0])
        pw.append(p[-1])  # each child's own wall clock, imports included
        cw.append(c[-1])
        print(f"  pandas.read_csv {p[0]:.1f} CPU s, {p[-1]:.1f} wall s ({int(p[1])} values) | trainsleuth "
              f"{c[0]:.1f} CPU s, {c[-1]:.1f} wall s ({int(c[1])} values)", flush=True)  # fmt: skip
    print(f"CSV {csize / 1e6:.0f} MB: pandas {min(pt):.1f} CPU s / {min(pw):.1f} wall s, trainsleuth "
          f"{min(ct):.1f} CPU s / {min(cw):.1f} wall s; ratio {min(pt) / min(ct):.2f}x on CPU time, "
          f"{min(pw) / min(cw):.2f}x on wall time (goal >= 1x)", flush=True)  # fmt: skip
    csv.unlink()
    return {
        "size": csize,
        "pandas_cpu": min(pt),
        "ours_cpu": min(ct),
        "pandas_wall": min(pw),
        "ours_wall": min(cw),
    }


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())

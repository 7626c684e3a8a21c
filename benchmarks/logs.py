"""Log-analysis benchmark: throughput and memory on real training logs, side by side with a naive scan.

1. Real logs (`benchmarks/reallogs.py`): public and produced training logs of seven formats from
   the corpus (Megatron-DeepSpeed/BLOOM, llm.c main.log, modded-nanogpt, DeepSpeed-Chat, HF
   Trainer stdout with tqdm, LightGBM, Ultralytics results.csv), each repeated with its step numbers
   continued to --size / 7 bytes, in a temporary folder (deleted afterwards). Two children run
   side by side, alternately: `trainsleuth.tools.logs.analyze` on every file, and the naive scan
   (one regex per line that reads every number and the key before it, keeping a running min/max
   per key). Reported: CPU seconds of each child (user + system; wall time on this shared machine
   mostly measures waiting), per-format CPU seconds, and the speed ratio (goal >= 5x).
2. Memory: one --rss-size log (default 1 GB) made of the text formats in turn, analysed by
   trainsleuth alone; reported: the child's peak RSS (goal < 300 MB).
3. A large numeric CSV (--csv-size bytes, default 200 MB): trainsleuth's CSV reader vs
   `pandas.read_csv`, each in a fresh interpreter with its imports, run alternately --repeat
   times; best of each on wall time and on CPU seconds (goal: at least as fast).

Usage: python -m benchmarks.logs [--size 105M] [--rss-size 1G] [--csv-size 200M] [--repeat 3]
`python -m benchmarks logs` runs all three (--quick: 35 MB of real logs, 200 MB RSS log, 50 MB CSV, once).
"""

from __future__ import annotations

import argparse
import json
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

# The naive scan: one regex per line reading every number (and the key before it, when there is one).
NAIVE = r"""
import json, re, sys, time
TOK = re.compile(r"(?:([A-Za-z_][\w./-]*)\s*[:=]?\s*)?([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
per_file = {}
for path in sys.argv[1:]:
    t = time.process_time()
    lo, hi = {}, {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            for i, m in enumerate(TOK.finditer(line)):
                k = m.group(1) or i
                v = float(m.group(2))
                if k in hi:
                    if v > hi[k]: hi[k] = v
                    if v < lo[k]: lo[k] = v
                else:
                    lo[k] = hi[k] = v
    per_file[path] = [time.process_time() - t, len(hi)]
print(json.dumps(per_file))
"""

OURS = r"""
import json, resource, sys, time
from trainsleuth.tools.logs import analyze
per_file = {}
for path in sys.argv[1:]:
    t = time.process_time()
    r = analyze(path)
    per_file[path] = [time.process_time() - t, len(r.series), len(r.events), r.records, r.verdict]
per_file["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(per_file))
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


def run_child(code: str, path: Path) -> list[float]:  # the CSV comparison's children
    """Run one side in a fresh interpreter; returns its printed numbers with the first one (the
    child's own timing) replaced by the child's CPU seconds (user + system), which stay
    meaningful on a shared, busy machine where wall time mostly measures waiting."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = [float(x) for x in proc.stdout.split()]
    return [cpu, *out[1:], out[0]]


def run_json(code: str, paths: list[Path]) -> tuple[float, dict]:  # type: ignore[type-arg]
    """Run one side in a fresh interpreter on `paths`; its CPU seconds (user + system) and the
    JSON it printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-c", code, *map(str, paths)], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"benchmark child failed: {proc.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), json.loads(proc.stdout)


def run_benchmark(quick: bool = False) -> list[BenchResult]:
    """The `python -m benchmarks` entry point (see benchmarks/common.py)."""
    size, rss_size, csv_size, repeat = ("35M", "200M", "50M", 1) if quick else ("105M", "1G", "200M", 3)
    args = argparse.Namespace(size=size, rss_size=rss_size, csv_size=csv_size, repeat=repeat)
    tmp = Path(tempfile.mkdtemp(prefix="ts-bench-logs-"))
    try:
        r = real(tmp, args)
        m = memory(tmp, args)
        c = csv_compare(tmp, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    cmd = f"python -m benchmarks.logs --size {size} --rss-size {rss_size} --csv-size {csv_size} --repeat {repeat}"
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
    mb = r["size"] / 1e6
    return [
        result(
            f"log analysis throughput, {mb:.0f} MB of real logs in 7 formats (CPU s)",
            r["naive_cpu"] / r["ours_cpu"],
            f"the naive one-regex-per-line scan, {mb / r['naive_cpu']:.1f} MB/s",
            5.0,
            unit="x faster",
            details=f"trainsleuth {mb / r['ours_cpu']:.1f} MB/s, best of {repeat}",
            command=cmd,
        ),
        result(
            f"peak RSS analysing a {m['size'] / 1e6:.0f} MB log of real logs",
            m["rss_mb"] / 300,
            "the 300 MB budget",
            1.0,
            direction="lower",
            unit="x budget",
            details=f"{m['rss_mb']:.0f} MB, {m['size'] / 1e6 / m['cpu']:.1f} MB/s",
            command=cmd,
        ),
        *csv_results,
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--size", default="105M", help="real logs, all formats together (default 105M)")
    ap.add_argument("--rss-size", default="1G", help="the memory test's log (default 1G)")
    ap.add_argument("--csv-size", default="200M", help="size of the CSV (default 200M)")
    ap.add_argument("--repeat", type=int, default=1, help="alternating runs of each side")
    ap.add_argument("--skip-real", action="store_true", help="no real-log throughput comparison")
    ap.add_argument("--skip-rss", action="store_true", help="no memory test")
    ap.add_argument("--skip-csv", action="store_true", help="no CSV comparison")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="ts-bench-logs-"))
    try:
        if not args.skip_real:
            real(tmp, args)
        if not args.skip_rss:
            memory(tmp, args)
        if not args.skip_csv:
            csv_compare(tmp, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def real(tmp: Path, args: argparse.Namespace) -> dict[str, float]:
    from benchmarks.reallogs import SOURCES, build

    t = time.perf_counter()
    files = build(tmp / "real", parse_size(args.size))
    size = sum(p.stat().st_size for p in files.values())
    print(
        f"built {size / 1e6:.0f} MB of real logs ({len(files)} formats) in {time.perf_counter() - t:.0f}s",
        flush=True,
    )
    paths = list(files.values())
    naive_t, ours_t = [], []
    last: tuple[dict, dict] = ({}, {})  # type: ignore[type-arg]
    for _ in range(args.repeat):
        nt, naive = run_json(NAIVE, paths)
        ot, ours = run_json(OURS, paths)
        naive_t.append(nt)
        ours_t.append(ot)
        last = (naive, ours)
        print(f"  naive scan {nt:.2f} CPU s | trainsleuth {ot:.2f} CPU s (ratio {nt / ot:.2f}x)", flush=True)
    naive, ours = last
    for src in SOURCES:
        p = str(files[src.name])
        mb = files[src.name].stat().st_size / 1e6
        print(f"    {src.name:22} {mb:5.1f} MB: naive {naive[p][0]:.2f} CPU s, trainsleuth {ours[p][0]:.2f} CPU s "
              f"({naive[p][0] / ours[p][0]:.1f}x), {ours[p][3]} records, verdict {ours[p][4]}", flush=True)  # fmt: skip
    nt, ot = min(naive_t), min(ours_t)
    print(f"real logs {size / 1e6:.0f} MB: naive {size / 1e6 / nt:.1f} MB/s, trainsleuth {size / 1e6 / ot:.1f} MB/s "
          f"(CPU, imports included), ratio {nt / ot:.2f}x (goal >= 5x)", flush=True)  # fmt: skip
    shutil.rmtree(tmp / "real", ignore_errors=True)
    return {"size": size, "naive_cpu": nt, "ours_cpu": ot}


def memory(tmp: Path, args: argparse.Namespace) -> dict[str, float]:
    from benchmarks.reallogs import mixed

    log = tmp / "real-1g.log"
    t = time.perf_counter()
    size = mixed(log, parse_size(args.rss_size))
    print(f"built a {size / 1e6:.0f} MB log of real logs in {time.perf_counter() - t:.0f}s", flush=True)
    cpu, out = run_json(OURS, [log])
    rec = out[str(log)]
    print(f"memory: {size / 1e6:.0f} MB in {cpu:.1f} CPU s ({size / 1e6 / cpu:.1f} MB/s), {rec[3]} records, "
          f"{rec[1]} series, peak RSS {out['rss_mb']:.0f} MB (goal < 300 MB)", flush=True)  # fmt: skip
    log.unlink()
    return {"size": size, "cpu": cpu, "rss_mb": out["rss_mb"]}


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

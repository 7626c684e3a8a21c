"""`python -m benchmarks` (what `make bench` runs): every benchmark, each ratio against its baseline and goal.

    python -m benchmarks                 # all of them
    python -m benchmarks logs faults     # only these
    python -m benchmarks --quick         # smaller inputs, fewer repetitions
    python -m benchmarks --json out.json # also write every record as JSON

Each benchmark runs in its own child process (a crash, a memory blow-up or a hang in one cannot take the
others down) with a time limit. A benchmark that is missing, raises, times out or returns malformed
records is reported as such and the others still run. The exit status is 0 when every benchmark ran and
met its goal, 1 when one ran but missed its goal, 2 when one is missing or failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from benchmarks.common import BenchResult, validate

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# The order benchmarks are run and printed in; any other module with `run_benchmark` runs after these.
KNOWN = ("startup", "logs", "probe", "bisect", "faults")
NOT_BENCHMARKS = {"common", "__init__", "__main__"}


def discover() -> list[str]:
    extra = []
    for p in sorted(HERE.iterdir()):
        name = p.stem if p.suffix == ".py" else p.name
        if name in NOT_BENCHMARKS or name in KNOWN or name.startswith(("_", ".")):
            continue
        if (p.suffix == ".py" and p.is_file()) or (p.is_dir() and (p / "__init__.py").is_file()):
            text = (p if p.is_file() else p / "__init__.py").read_text(encoding="utf-8", errors="replace")
            if "def run_benchmark" in text:
                extra.append(name)
    return [*KNOWN, *extra]


def module_exists(name: str) -> bool:
    return (HERE / f"{name}.py").is_file() or (HERE / name / "__init__.py").is_file()


def run_one_in_process(name: str, quick: bool) -> list[BenchResult]:
    """Import benchmarks.<name> and call its run_benchmark (used inside the child process)."""
    import importlib
    import inspect

    module = importlib.import_module(f"benchmarks.{name}")
    fn = getattr(module, "run_benchmark", None)
    if fn is None or not callable(fn):
        raise RuntimeError(f"benchmarks/{name} defines no run_benchmark() (see benchmarks/common.py)")
    params = inspect.signature(fn).parameters
    raw = fn(quick=quick) if "quick" in params else fn()
    return validate(raw)


def _child(name: str, quick: bool, out_file: str) -> int:
    try:
        records: Any = run_one_in_process(name, quick)
        payload = {"ok": True, "results": records}
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        tail = traceback.format_exc()[-2000:]
        payload = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": tail}
    Path(out_file).write_text(json.dumps(payload, default=str), encoding="utf-8")
    return 0


def run_child(name: str, quick: bool, timeout: float) -> dict[str, Any]:
    """Run one benchmark in a child process; always returns {'status', 'results'|'error'}."""
    if not module_exists(name):
        return {"status": "missing", "error": f"benchmarks/{name}.py is not present"}
    with tempfile.TemporaryDirectory(prefix="ts-bench-") as tmp:
        out_file = os.path.join(tmp, "result.json")
        cmd = [sys.executable, "-m", "benchmarks", "--child", name, "--child-out", out_file]
        if quick:
            cmd.append("--quick")
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        try:
            proc = subprocess.run(
                cmd, cwd=ROOT, env=env, timeout=timeout, stdout=sys.stderr, stderr=subprocess.PIPE, text=True
            )
        except subprocess.TimeoutExpired:
            return {"status": "failed", "error": f"timed out after {timeout:.0f} s"}
        if not os.path.isfile(out_file):
            tail = (proc.stderr or "").strip().splitlines()[-5:]
            return {
                "status": "failed",
                "error": f"exited with status {proc.returncode} without a result"
                + (": " if tail else "")
                + " | ".join(tail),
            }
        payload = json.loads(Path(out_file).read_text(encoding="utf-8"))
    if not payload.get("ok"):
        return {"status": "failed", "error": payload.get("error", "unknown error")}
    return {"status": "ran", "results": payload["results"]}


def fmt_ratio(r: dict[str, Any]) -> str:
    ratio = r.get("ratio")
    if ratio is None:
        return "n/a"
    unit = r.get("unit", "")
    text = f"{ratio:.3g}"
    return f"{text} {unit}".strip()


def fmt_goal(r: dict[str, Any]) -> str:
    op = "<=" if r.get("direction") == "lower" else ">="
    unit = r.get("unit", "")
    return f"{op} {r['goal']:.3g} {unit}".strip()


def render(outcomes: dict[str, dict[str, Any]]) -> str:
    rows = [("benchmark", "figure", "ratio", "baseline", "goal", "met")]
    for name, out in outcomes.items():
        if out["status"] != "ran":
            rows.append((name, out["status"].upper(), "-", "-", "-", out["error"]))
            continue
        for r in out["results"]:
            rows.append(
                (name, r["name"], fmt_ratio(r), r["baseline"], fmt_goal(r), "yes" if r["met"] else "NO")
            )
    widths = [min(max(len(row[i]) for row in rows), 60) for i in range(len(rows[0]))]
    lines = []
    for i, row in enumerate(rows):
        cells = [
            c if len(c) <= widths[j] or j == len(row) - 1 else c[: widths[j] - 1] + "…"
            for j, c in enumerate(row)
        ]
        lines.append("  ".join(c.ljust(widths[j]) for j, c in enumerate(cells)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    ap.add_argument("--quick", action="store_true", help="smaller inputs and fewer repetitions")
    ap.add_argument("--timeout", type=float, default=3600.0, help="time limit per benchmark in seconds")
    ap.add_argument("--json", metavar="FILE", help="also write every outcome as JSON to FILE")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return _child(args.child, args.quick, args.child_out)

    available = discover()
    names = args.names or available
    unknown = [n for n in names if n not in available and not module_exists(n)]
    outcomes: dict[str, dict[str, Any]] = {}
    for name in names:
        if name in unknown:
            outcomes[name] = {"status": "missing", "error": f"no benchmark named {name!r}"}
            continue
        print(f"== {name} ...", file=sys.stderr, flush=True)
        outcomes[name] = run_child(name, args.quick, args.timeout)
    print(render(outcomes))
    if args.json:
        Path(args.json).write_text(json.dumps(outcomes, indent=2, default=str), encoding="utf-8")
    if any(o["status"] != "ran" for o in outcomes.values()):
        return 2
    if any(not r["met"] for o in outcomes.values() for r in o["results"]):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""trace_diff on the workload corpus (tests/workloads): quiet on healthy pairs, naming the broken twins.

Healthy: each of the corpus's healthy scripts against itself with another seed (`--seed 0` against
`--seed 1`): trace_diff must report no difference beyond noise (the seeds are pinned; a difference is a
false alarm). Broken: each broken twin against the healthy script it breaks: trace_diff must report a
difference, and the first difference, an update lost or a broken invariant should name the module the
manifest names (`netD`, `teacher`, ...). Nobody here wrote these scripts for trace_diff: they are the
corpus the gradient probe is measured on (`tests/workloads/MEASUREMENTS.md`).

    python -m benchmarks.trace_corpus [--only dcgan,vae] [--steps 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import BenchResult, result

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "workloads"


def _workloads() -> tuple[Any, Any]:
    sys.path.insert(0, str(CORPUS))
    try:
        import manifest  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(CORPUS))
    return manifest.HEALTHY, manifest.BROKEN


def _trace(ws: Path, command_a: str, command_b: str, steps: int, start: int = 1) -> dict[str, Any]:
    from trainsleuth.tools.trace import Reporter, TraceDiffError, plan_trace_diff, run_trace_diff

    started = time.monotonic()
    try:
        plan = plan_trace_diff(
            workspace=ws,
            command_a=command_a,
            command_b=command_b,
            python_a=Path(sys.executable),
            steps=steps,
            timeout_s=600,
            start=start,
        )
        report = run_trace_diff(plan, Reporter())
    except TraceDiffError as exc:
        return {"error": exc.message, "seconds": round(time.monotonic() - started, 1)}
    return {"report": report.model_dump(mode="json"), "seconds": round(time.monotonic() - started, 1)}


def changed_lines(good: Path, bad: Path) -> set[int]:
    """The lines of `bad` that differ from `good` (what the twin broke), by a line diff."""
    import difflib

    a, b = good.read_text().splitlines(), bad.read_text().splitlines()
    out: set[int] = set()
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            out.update(range(j1 + 1, max(j2, j1 + 1) + 1))
    return out


def points_at_change(report: dict[str, Any], script: str, lines: set[int]) -> bool:
    """Whether the first difference's call site in b (or a caller of it) is a line the twin changed."""
    from trainsleuth.tools.trace.traces import site_parts

    first = report.get("first_difference")
    if not first:
        return False
    for site in [first.get("site_b"), *(first.get("callers_b") or [])]:
        parts = site_parts((site or "").split(" (via ")[0])
        if parts and parts[0] == script and parts[1] in lines:
            return True
    return False


def _mentions(report: dict[str, Any], modules: tuple[str, ...]) -> bool:
    """Whether the first difference, an update lost or a broken invariant names one of `modules`."""
    if not modules:
        return report["verdict"] == "differs"
    texts = []
    first = report.get("first_difference")
    if first:
        texts.append(first["message"])
    texts += [d["message"] for d in report["differences"] if d["code"] == "update_lost"]
    texts += [x["message"] + " " + " ".join(x["subjects"]) for x in report["invariants"]]
    return any(f"{m}." in t or f"{m} " in t or t.endswith(m) or f"{m}(" in t for t in texts for m in modules)


def run_corpus(only: set[str] | None, steps: int) -> dict[str, Any]:
    healthy, broken = _workloads()
    out: dict[str, Any] = {"healthy": {}, "broken": {}}
    with tempfile.TemporaryDirectory(prefix="ts-bench-corpus-") as tmp:
        ws = Path(tmp) / "corpus"
        shutil.copytree(CORPUS, ws, ignore=shutil.ignore_patterns("__pycache__", "*.md", "entrypoints"))
        for w in healthy:
            if only and w.name not in only:
                continue
            script = f"{w.name}.py"
            if "--seed" not in (ws / script).read_text():
                out["healthy"][w.name] = {"skipped": "no --seed argument"}
                continue
            res = _trace(ws, f"python {script} --seed 0", f"python {script} --seed 1", steps, w.observe_from)
            out["healthy"][w.name] = _summary(res)
            print(f"healthy {w.name}: {out['healthy'][w.name]}", file=sys.stderr)
        for w in broken:
            if only and w.name not in only and (w.twin_of not in only):
                continue
            res = _trace(ws, f"python {w.twin_of}.py", f"python broken/{w.name}.py", steps, w.observe_from)
            row = _summary(res)
            if "report" in res:
                row["names_module"] = _mentions(res["report"], w.modules)
                row["at_changed_line"] = points_at_change(
                    res["report"],
                    f"broken/{w.name}.py",
                    changed_lines(ws / f"{w.twin_of}.py", ws / f"broken/{w.name}.py"),
                )
                row["modules"] = list(w.modules)
            out["broken"][w.name] = row
            print(f"broken {w.name}: {row}", file=sys.stderr)
    return out


def _summary(res: dict[str, Any]) -> dict[str, Any]:
    if "error" in res:
        return {"error": res["error"][:300], "seconds": res["seconds"]}
    rep = res["report"]
    first = rep.get("first_difference")
    return {
        "verdict": rep["verdict"],
        "first": f"{first['code']}: {first['message'][:300]}" if first else None,
        "invariants": [f"{x['invariant']}@{x['step']}: {x['message'][:160]}" for x in rep["invariants"][:3]],
        "noise_events": rep["noise"]["differing_events"],
        "seconds": res["seconds"],
    }


def figures(out: dict[str, Any], steps: int) -> list[BenchResult]:
    healthy = {k: v for k, v in out["healthy"].items() if "skipped" not in v}
    quiet = [k for k, v in healthy.items() if v.get("verdict") in ("identical", "within_noise")]
    alarms = [k for k, v in healthy.items() if v.get("verdict") == "differs"]
    errors = [k for k, v in healthy.items() if "error" in v]
    broken = out["broken"]
    found = [k for k, v in broken.items() if v.get("verdict") == "differs"]
    named = [k for k, v in broken.items() if v.get("names_module") or v.get("at_changed_line")]
    at_line = [k for k, v in broken.items() if v.get("at_changed_line")]
    command = f"python -m benchmarks.trace_corpus --steps {steps}"
    return [
        result(
            "trace_diff quiet on healthy corpus pairs (seed 0 vs seed 1)",
            round(len(quiet) / max(len(healthy), 1), 3),
            f"{len(healthy)} healthy workloads of tests/workloads",
            1.0,
            unit="share quiet",
            details=f"false alarms: {', '.join(alarms) or 'none'}; could not run: {', '.join(errors) or 'none'}",
            command=command,
        ),
        result(
            "trace_diff on broken twins vs their healthy script: the broken module or the changed line named",
            round(len(named) / max(len(broken), 1), 3),
            f"{len(broken)} broken twins; {len(found)} reported as differing",
            0.8,
            unit="share named",
            details=f"first difference at a line the twin changed: {len(at_line)}/{len(broken)}; "
            + (
                "not named: " + ", ".join(k for k in broken if k not in named)
                if len(named) < len(broken)
                else "all named"
            ),
            command=command,
        ),
    ]


def run_benchmark(quick: bool = False) -> list[BenchResult]:
    steps = 3
    only = {"dcgan", "vae", "dcgan_d_never_steps", "mean_teacher_ema_never_updated"} if quick else None
    return figures(run_corpus(only, steps), steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated workload names")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--json", default=None, help="write every pair's outcome here")
    args = parser.parse_args()
    only = {n for n in args.only.split(",") if n} or None
    out = run_corpus(only, args.steps)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    for r in figures(out, args.steps):
        print(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()

"""The probe on real architectures: recall, false alarms and localisation on `tests/realarch/`.

Every setup of the real-architecture suite (Hugging Face transformers from small configs, standard
CNN/MLP/RNN training, the optimizers and schedules their docs recommend) runs through the public CLI,
`trainsleuth probe FILE:FUNCTION --json` (default 8 steps), two at a time, like the fault benchmark:

- recall: broken setups whose expected code is reported as a warning or error;
- false alarms: healthy setups with any warning or error (goal: none);
- localisation: broken setups with an expected module whose finding names it.

    python -m benchmarks.realarch [--jobs 2]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.common import BenchResult, result

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "tests" / "realarch"


def _load(name: str) -> Any:
    path = SUITE / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cases() -> list[tuple[str, str, str | None, str | None]]:
    """(file, function, expected code or None for healthy, expected module)."""
    out: list[tuple[str, str, str | None, str | None]] = []
    for f in _load("realarch_healthy").HEALTHY:
        out.append(("realarch_healthy.py", f.__name__, None, None))
    for f, code, module in _load("realarch_broken").BROKEN:
        out.append(("realarch_broken.py", f.__name__, code, module))
    return out


def run_case(file: str, fn: str, timeout: float = 600.0) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "trainsleuth", "probe", f"tests/realarch/{file}:{fn}", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        out = {"ok": False, "error": {"message": proc.stderr[-500:]}}
    out["seconds"] = time.perf_counter() - t0
    return out


def measure(jobs: int = 2) -> dict[str, Any]:
    todo = cases()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        outs = list(pool.map(lambda c: run_case(c[0], c[1]), todo))
    wall = time.perf_counter() - t0
    healthy = broken = found = false_alarms = loc_total = loc_ok = failed = 0
    misses, alarms, wrong_place = [], [], []
    for (_file, fn, code, module), out in zip(todo, outs, strict=True):
        if not out.get("ok"):
            failed += 1
            if code is None:
                healthy += 1
                false_alarms += 1
                alarms.append(f"{fn} (failed to run)")
            else:
                broken += 1
                misses.append(f"{fn} (failed to run)")
            continue
        bad = [f for f in out["findings"] if f["severity"] in ("warning", "error")]
        if code is None:
            healthy += 1
            if bad:
                false_alarms += 1
                alarms.append(f"{fn} ({', '.join(sorted({f['code'] for f in bad}))})")
            continue
        broken += 1
        hits = [f for f in bad if f["code"] == code]
        if hits:
            found += 1
        else:
            misses.append(f"{fn} ({code})")
        if module is not None:
            loc_total += 1
            if any(f["module"] == module for f in hits):
                loc_ok += 1
            else:
                wrong_place.append(f"{fn} (expected {module})")
    return {
        "healthy": healthy,
        "broken": broken,
        "recall": found / broken if broken else None,
        "found": found,
        "false_alarms": false_alarms,
        "false_alarm_rate": false_alarms / healthy if healthy else None,
        "localised": loc_ok,
        "localisation_total": loc_total,
        "failed": failed,
        "misses": misses,
        "alarms": alarms,
        "wrong_place": wrong_place,
        "wall_s": wall,
    }


def run_benchmark(quick: bool = False) -> list[BenchResult]:
    m = measure()
    cmd = "python -m benchmarks.realarch"
    details = (
        f"{m['healthy']} healthy and {m['broken']} broken setups through the CLI, {m['wall_s']:.0f} s wall"
    )
    return [
        result(
            "probe recall on real architectures",
            m["recall"],
            f"{m['broken']} broken setups (one real-world bug each)",
            1.0,
            unit="recall",
            details=details + (f"; missed: {', '.join(m['misses'])}" if m["misses"] else ""),
            command=cmd,
        ),
        result(
            "probe false alarms on healthy real architectures",
            m["false_alarm_rate"],
            f"{m['healthy']} healthy setups",
            0.0,
            direction="lower",
            unit="share with a warning or error",
            details=details + (f"; alarms: {', '.join(m['alarms'])}" if m["alarms"] else ""),
            command=cmd,
        ),
        result(
            "probe localisation on real architectures",
            m["localised"] / m["localisation_total"] if m["localisation_total"] else None,
            f"{m['localisation_total']} broken setups with an expected module",
            1.0,
            unit="share localised",
            details=details + (f"; wrong: {', '.join(m['wrong_place'])}" if m["wrong_place"] else ""),
            command=cmd,
        ),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    m = measure(args.jobs)
    print(
        f"recall {m['found']}/{m['broken']}, false alarms {m['false_alarms']}/{m['healthy']}, "
        f"localised {m['localised']}/{m['localisation_total']}, failed to run {m['failed']}, {m['wall_s']:.0f} s"
    )
    for label in ("misses", "alarms", "wrong_place"):
        for item in m[label]:
            print(f"  {label}: {item}")


if __name__ == "__main__":
    main()

"""`python -m benchmarks.faults`: run every fault case through the public CLI, score it, write the table.

python -m benchmarks.faults                  # all cases, table into docs/benchmarks.md
python -m benchmarks.faults --kind logs      # only the log cases
python -m benchmarks.faults --only ID ...    # some cases, printed, docs untouched
python -m benchmarks.faults --json out.json  # also every case's raw records
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import sys
import time
from pathlib import Path

from benchmarks.faults.harness import ROOT, CaseRun, render_markdown, run_all, score, write_table
from benchmarks.faults.manifest import load_manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.faults", description=__doc__.splitlines()[0])
    ap.add_argument("--kind", choices=("probe", "logs", "precision"), help="only cases of this kind")
    ap.add_argument("--only", nargs="+", metavar="ID", help="only these case ids (the docs are not written)")
    ap.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per case (default 600)")
    ap.add_argument("--cli", help="command that runs trainsleuth (default: this python -m trainsleuth)")
    ap.add_argument("--json", metavar="FILE", help="write every case's records and the score as JSON")
    ap.add_argument("--no-write", action="store_true", help="do not write docs/benchmarks.md")
    ap.add_argument("--doc", default=str(ROOT / "docs" / "benchmarks.md"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    manifest = load_manifest()
    cases = manifest.cases
    if args.kind:
        cases = [c for c in cases if c.kind == args.kind]
    if args.only:
        known = manifest.by_id()
        unknown = [i for i in args.only if i not in known]
        if unknown:
            print(f"unknown case id(s): {', '.join(unknown)}", file=sys.stderr)
            return 2
        cases = [known[i] for i in args.only]
    cli = shlex.split(args.cli) if args.cli else None

    def progress(r: CaseRun) -> None:
        status = f"{len(r.records)} record(s)" if r.ok else f"FAILED: {r.error}"
        print(f"  {r.case_id}: {status} ({r.seconds:.1f} s)", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    runs = run_all(cases, cli=cli, jobs=args.jobs, timeout=args.timeout, progress=progress)
    wall = time.perf_counter() - t0
    s = score(cases, runs)
    parts = ["python -m benchmarks.faults"]
    if args.kind:
        parts.append(f"--kind {args.kind}")
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    table = render_markdown(s, " ".join(parts), when, wall)
    print(table)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "runs": {k: vars(v) for k, v in runs.items()},
                    "recall": s.recall,
                    "false_alarms": s.false_alarms,
                    "origin_accuracy": s.origin_accuracy,
                    "step_accuracy": s.step_accuracy,
                    "unexpected": s.unexpected,
                    "failed_runs": s.failed_runs,
                },
                indent=2,
                default=str,
            ),
            encoding="utf-8",
        )
    if not args.no_write and not args.only:
        write_table(Path(args.doc), table)
        print(f"table written to {args.doc}", file=sys.stderr)
    met = (
        not s.failed_runs
        and (s.recall or 0) >= 0.95
        and not s.false_alarms
        and (s.origin_accuracy or 0) >= 0.9
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

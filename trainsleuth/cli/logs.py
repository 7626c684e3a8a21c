"""`trainsleuth logs analyze|extract` (issue 4): training-log analysis from the command line.

Exit codes: 0 ok, 1 an event at or above --fail-on, 2 usage, 3 the input cannot be analysed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from trainsleuth.cli._options import add_fail_on, fail_level

FORMAT_CHOICES = (
    "auto", "jsonl", "csv", "tsv", "hf_dict", "trainer_state", "keyvalue", "megatron", "nanogpt", "tqdm",
    "tensorboard", "mlflow", "markdown",
)  # fmt: skip


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "logs",
        help="analyse a training log or run folder",
        description="analyse a training log or run folder (logs analyze|extract PATH)",
    )
    lsub = p.add_subparsers(dest="logs_command", metavar="ACTION")
    a = lsub.add_parser("analyze", help="report anomalies (findings.md log codes) and error lines")
    a.add_argument("path", help="log file, or run folder (TensorBoard log dir, MLflow run)")
    a.add_argument(
        "--format", default="auto", choices=FORMAT_CHOICES, help="force a format (default: detect)"
    )
    a.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    a.add_argument("--plot", metavar="OUT.png", help="write a PNG plot of the key metrics with events marked")
    add_fail_on(a)
    a.set_defaults(func=run_analyze)
    e = lsub.add_parser("extract", help="print chosen metric series, downsampled with extremes kept")
    e.add_argument("path")
    e.add_argument("--metric", action="append", default=[], help="metric name or role (repeatable)")
    e.add_argument("--max-points", type=int, default=500, help="at most N points per series (default 500)")
    e.add_argument("--step-min", type=float)
    e.add_argument("--step-max", type=float)
    e.add_argument("--format", default="auto", choices=FORMAT_CHOICES)
    e.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    e.set_defaults(func=run_extract)
    p.set_defaults(func=_usage, _parser=p)


def _usage(args: argparse.Namespace) -> int:
    args._parser.print_help(sys.stderr)
    return 2


def _error(message: str, next_step: str | None) -> int:
    print(f"trainsleuth logs: {message}", file=sys.stderr)
    if next_step:
        print(f"next step: {next_step}", file=sys.stderr)
    return 3


def run_analyze(args: argparse.Namespace) -> int:
    from pathlib import Path

    from trainsleuth.tools.findings import SEVERITY_RANK
    from trainsleuth.tools.logs import LogInputError
    from trainsleuth.tools.logs.analyze import build_report, collect

    path = Path(args.path)
    if not path.exists() and not path.is_symlink():
        return _error(f"{args.path}: no such file or folder", "check the path")
    try:
        collector, errors, stats = collect(path, args.format)
    except LogInputError as exc:
        return _error(exc.message, exc.next_step)
    report = build_report(path, collector, errors, stats)
    if args.plot:
        from trainsleuth.tools.extras import MissingExtra
        from trainsleuth.tools.logs.plot import render_png

        try:
            png = render_png(collector, report.events)
        except MissingExtra as exc:
            report.notes.append(f"no plot written: {exc.message}")
            png = b""
        if png is None:
            report.notes.append("no plot written: the log has no metric series")
        elif png:
            try:
                Path(args.plot).write_bytes(png)
            except OSError as exc:
                return _error(
                    f"cannot write the plot to {args.plot}: {exc.strerror or exc}", "pick a writable path"
                )
    if args.json:
        json.dump(report.model_dump(mode="json"), sys.stdout)
        sys.stdout.write("\n")
    else:
        _print_report(report)
    if fail_level(args.fail_on):
        floor = SEVERITY_RANK[args.fail_on]
        if any(SEVERITY_RANK[e.severity] >= floor for e in report.events):
            return 1
    return 0


def _print_report(report: Any) -> None:
    out = sys.stdout
    verdict = "healthy (no warning or error events)" if report.healthy else "problems found"
    out.write(
        f"{report.path}: {report.format}, {report.records} records, {len(report.series)} metrics: {verdict}\n"
    )
    for note in report.notes:
        out.write(f"note: {note}\n")
    for s in report.series[:30]:
        rng = (
            f"{s.first} -> {s.last} (min {s.min}, max {s.max})" if s.first is not None else "no finite values"
        )
        out.write(f"  {s.name} [{s.role}]: {s.points} points, {rng}\n")
    if report.events:
        out.write("events:\n")
        for e in report.events:
            out.write(f"  {e.one_line()}\n")
    else:
        out.write("no events\n")


def run_extract(args: argparse.Namespace) -> int:
    from pathlib import Path

    from trainsleuth.tools.logs import LogInputError, extract

    if args.max_points < 2:
        print("trainsleuth logs extract: --max-points must be at least 2", file=sys.stderr)
        return 2
    path = Path(args.path)
    if not path.exists():
        return _error(f"{args.path}: no such file or folder", "check the path")
    try:
        res = extract(path, args.metric, max_points=args.max_points, step_min=args.step_min,
                      step_max=args.step_max, fmt=args.format)  # fmt: skip
    except LogInputError as exc:
        return _error(exc.message, exc.next_step)
    if args.json:
        json.dump(res.model_dump(mode="json"), sys.stdout)
        sys.stdout.write("\n")
    else:
        for note in res.notes:
            print(f"note: {note}")
        for s in res.series:
            print(f"# {s.name} [{s.role}] {len(s.values)} of {s.points_in_log} points")
            for st, v in zip(s.steps, s.values, strict=False):
                print(f"{st:g}\t{v:.9g}")
    return 1 if res.missing and not res.series else 0

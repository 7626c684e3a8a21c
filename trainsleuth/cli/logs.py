"""`trainsleuth logs analyze|extract` (issue 4): training-log analysis from the command line.

Exit codes: 0 ok, 1 an event at or above --fail-on, 2 usage, 3 the input cannot be analysed,
4 the log was read but not understood (no loss series recognised) and --fail-on was given.
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

EXIT_CODES = """exit codes:
  0  done (healthy, or nothing at or above --fail-on)
  1  problems found: an event at or above --fail-on
  2  usage error
  3  the input cannot be analysed (missing, binary, not a regular file, unknown key in --role, ...)
  4  not understood: no loss series was recognised, so nothing was judged (with any --fail-on
     but never); map the keys with --role loss=KEY [--role step=KEY]"""

EXIT_NOT_UNDERSTOOD = 4


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "logs",
        help="analyse a training log or run folder",
        description="analyse a training log or run folder (logs analyze|extract PATH)",
    )
    lsub = p.add_subparsers(dest="logs_command", metavar="ACTION")
    a = lsub.add_parser(
        "analyze",
        help="report anomalies (findings.md log codes), error lines and a verdict",
        description="Read a training log or run folder and report a verdict (healthy, problems, not "
        "understood), the log events of findings.md and a parse report of how it was read.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    a.add_argument("path", help="log file (.gz too), or run folder (TensorBoard log dir, MLflow run)")
    a.add_argument(
        "--format", default="auto", choices=FORMAT_CHOICES, help="force a format (default: detect)"
    )
    a.add_argument("--role", action="append", default=[], metavar="ROLE=KEY",
                   help="correct the reading, e.g. --role loss=trl --role step=s (repeatable)")  # fmt: skip
    a.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    a.add_argument("--plot", metavar="OUT.png", help="write a PNG plot of the key metrics with events marked")
    add_fail_on(a)
    a.set_defaults(func=run_analyze)
    e = lsub.add_parser("extract", help="print chosen metric series, downsampled with extremes kept",
                        epilog="exit codes: 0 done, 1 none of the asked metrics exists, 2 usage, 3 bad input")  # fmt: skip
    e.add_argument("path")
    e.add_argument("--metric", action="append", default=[], help="metric name or role (repeatable)")
    e.add_argument("--max-points", type=int, default=500, help="at most N points per series (default 500)")
    e.add_argument("--step-min", type=float)
    e.add_argument("--step-max", type=float)
    e.add_argument("--format", default="auto", choices=FORMAT_CHOICES)
    e.add_argument("--role", action="append", default=[], metavar="ROLE=KEY", help="as for analyze")
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
    from trainsleuth.tools.logs.infer import parse_roles

    path = Path(args.path)
    if not path.exists() and not path.is_symlink():
        return _error(f"{args.path}: no such file or folder", "check the path")
    try:
        user = parse_roles(args.role)
        collector, errors, stats = collect(path, args.format, step_key=user.get("step"))
        report = build_report(path, collector, errors, stats, user)
    except LogInputError as exc:
        return _error(exc.message, exc.next_step)
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
    level = fail_level(args.fail_on)
    if level:
        floor = SEVERITY_RANK[level]
        if any(SEVERITY_RANK[e.severity] >= floor for e in report.events):
            return 1
        if report.verdict == "not_understood":
            if report.parse.judged:
                print(
                    f"trainsleuth logs: not judged: {', '.join(report.parse.judged)} is too short to show a trend",
                    file=sys.stderr,
                )
                print("next step: pass a longer log (5 records or more)", file=sys.stderr)
                return EXIT_NOT_UNDERSTOOD
            print(
                "trainsleuth logs: not understood: no loss series was recognised, so nothing was judged",
                file=sys.stderr,
            )
            print("next step: map the keys with --role loss=KEY (and --role step=KEY)", file=sys.stderr)
            return EXIT_NOT_UNDERSTOOD
    return 0


def _print_report(report: Any) -> None:
    from trainsleuth.tools.logs.render import parse_lines, value, verdict_line

    out = sys.stdout
    parse = report.parse.model_dump()
    out.write(
        f"{report.path}: {report.format}, {report.records} records, {len(report.series)} metrics: "
        f"{verdict_line(report.verdict, parse['judged'])}\n"
    )
    for note in report.notes:
        out.write(f"note: {note}\n")
    for line in parse_lines(parse):
        out.write(f"parse: {line}\n")
    for s in report.series[:30]:
        if s.first is None:
            rng = "no finite values"
        else:
            rng = f"{value(s.first)} -> {value(s.last)}"
            if s.min is not None:
                rng += f" (min {value(s.min)}, max {value(s.max)})"
        if s.nonfinite:
            rng += f"; {s.nonfinite} NaN/Inf from step {value(s.first_nonfinite_step)}"
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
                      step_max=args.step_max, fmt=args.format, roles=args.role)  # fmt: skip
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
                print(f"{st:g}\t{v:.9g}" if isinstance(v, float) else f"{st:g}\t{v}")
    return 1 if res.missing and not res.series else 0

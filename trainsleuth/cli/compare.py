"""`trainsleuth compare GOOD BAD` and `trainsleuth resume-check ENTRYPOINT` (issue 20).

trainsleuth compare runs/good runs/bad [--also-good runs/seed2] [--metric loss] [--plot both.png]
                   [--good-ref v1.2 --bad-ref HEAD --train-command "python train.py --log {log}"]
                   [--json] [--fail-on-divergence]
trainsleuth resume-check train.py:make_resume [--steps-before 4] [--steps-after 4] [--python PY] [--json]

Exit codes: 0 done (compare: within noise or identical; resume-check: everything restored), 1 the
runs diverge (with --fail-on-divergence) or the resume loses state, 2 usage, 3 the input cannot
be read or the entrypoint cannot run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    c = sub.add_parser(
        "compare",
        help="compare a run with one that works: first metric to leave the noise band, config diff",
        description="Align GOOD and BAD (log files, run folders or probe reports, any supported format) by "
        "step; report the first step where a metric of BAD leaves GOOD's noise band, in which order metrics "
        "diverge, and their config and environment differences ranked by the failure-mode catalog.",
    )
    c.add_argument("good", help="the run that works (log file, run folder or probe report)")
    c.add_argument("bad", help="the run under test")
    c.add_argument(
        "--also-good", action="append", default=[], metavar="RUN", help="another good run (repeatable)"
    )
    c.add_argument(
        "--metric", action="append", default=[], help="metric name or role to compare (repeatable)"
    )
    c.add_argument("--good-ref", help="commit (or package==version) of the good run, for a bisect offer")
    c.add_argument("--bad-ref", help="commit (or package==version) of the run under test")
    c.add_argument("--train-command", help="command that trains and writes the log ({log}: where it goes)")
    c.add_argument("--plot", metavar="OUT.png", help="write a PNG of both runs with the divergence marked")
    c.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    c.add_argument("--fail-on-divergence", action="store_true", help="exit 1 when the runs diverge or part")
    c.set_defaults(func=run_compare)

    r = sub.add_parser(
        "resume-check",
        help="save, restore in a fresh process, continue: name what a resume does not restore",
        description="Train ENTRYPOINT N steps, save (its own save(path), else every state_dict), restore in a "
        "fresh process and continue M steps; compared with the uninterrupted run, name what was not restored.",
    )
    r.add_argument("entrypoint", help="path/to/file.py:function or package.module:function")
    r.add_argument("--steps-before", type=int, default=4, help="steps before the save (default 4)")
    r.add_argument("--steps-after", type=int, default=4, help="steps compared after it (default 4)")
    r.add_argument("--python", default=None, help="interpreter (default: ./.venv if present, else this one)")
    r.add_argument("--timeout", type=float, default=300.0, metavar="S", help="per process (default 300)")
    r.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    r.set_defaults(func=run_resume)


def _error(args: argparse.Namespace, command: str, message: str, next_step: str | None) -> int:
    from trainsleuth.cli import EXIT_ERROR

    if args.json:
        print(json.dumps({"ok": False, "error": {"message": message, "next_step": next_step}}))
    print(f"trainsleuth {command}: {message}", file=sys.stderr)
    if next_step:
        print(f"next step: {next_step}", file=sys.stderr)
    return EXIT_ERROR


def run_compare(args: argparse.Namespace) -> int:
    from trainsleuth.cli import EXIT_EXPECTATION, EXIT_OK, EXIT_USAGE
    from trainsleuth.knowledge.relevance import for_workspace
    from trainsleuth.tools.compare.plot import render_png
    from trainsleuth.tools.compare.report import compare_runs, render_text
    from trainsleuth.tools.compare.runs import RunInputError

    if bool(args.good_ref) != bool(args.bad_ref):
        print("trainsleuth compare: give both --good-ref and --bad-ref, or neither", file=sys.stderr)
        return EXIT_USAGE
    cwd = Path.cwd()

    try:
        result = compare_runs(
            Path(args.good),
            Path(args.bad),
            more_good=[Path(p) for p in args.also_good],
            metrics=args.metric,
            good_ref=args.good_ref,
            bad_ref=args.bad_ref,
            train_command=args.train_command,
            repo=cwd,
            workspace=cwd,
            relevance=for_workspace(cwd),
        )
    except RunInputError as exc:
        return _error(args, "compare", exc.message, exc.next_step)
    report = result.report
    if args.plot:
        first = report.first_divergence.first_step if report.first_divergence else None
        png = render_png(result.plot_pairs, first, ("good", "under test"))
        if png is None:
            report.notes.append("no plot written: no metric was compared")
        else:
            try:
                Path(args.plot).write_bytes(png)
            except OSError as exc:
                return _error(
                    args,
                    "compare",
                    f"cannot write {args.plot}: {exc.strerror or exc}",
                    "pick a writable path",
                )
    if args.json:
        print(json.dumps({"ok": True, **report.model_dump(mode="json")}))
    else:
        print(render_text(report))
    if args.fail_on_divergence and report.verdict in ("diverged", "parted"):
        return EXIT_EXPECTATION
    return EXIT_OK


def run_resume(args: argparse.Namespace) -> int:
    from trainsleuth.cli import EXIT_EXPECTATION, EXIT_OK, EXIT_USAGE
    from trainsleuth.tools.compare.resume import ResumeError, check_resume, render_resume
    from trainsleuth.tools.interpreter import InterpreterError, resolve_interpreter

    if not (1 <= args.steps_before <= 1000 and 1 <= args.steps_after <= 1000):
        print("trainsleuth resume-check: --steps-before and --steps-after must be 1..1000", file=sys.stderr)
        return EXIT_USAGE
    cwd = Path.cwd()
    try:
        python = resolve_interpreter(args.python, cwd)
    except InterpreterError as exc:
        return _error(args, "resume-check", str(exc), "pass an existing interpreter with --python")
    try:
        report = check_resume(
            args.entrypoint,
            python=python,
            cwd=cwd,
            steps_before=args.steps_before,
            steps_after=args.steps_after,
            timeout_s=args.timeout,
        )
    except ResumeError as exc:
        message = exc.message + ("\n" + exc.detail[-1500:] if exc.detail and not args.json else "")
        return _error(args, "resume-check", message, exc.next_step)
    if args.json:
        print(json.dumps({"ok": True, **report.model_dump(mode="json")}))
    else:
        print(render_resume(report))
    return EXIT_OK if report.healthy else EXIT_EXPECTATION

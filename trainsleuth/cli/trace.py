"""`trainsleuth trace-diff COMMAND` (issue 29): the first call or tensor that differs between two variants.

trainsleuth trace-diff "python train.py" --rev-a v1.2 --rev-b HEAD [--steps 5] [--json]
trainsleuth trace-diff "python train.py" --command-b "python train.py --fused" [--json]
trainsleuth trace-diff "python train.py" --python .venv-old/bin/python --python-b .venv-new/bin/python

COMMAND is variant a (the good one); b is the same command at --rev-b, with --python-b, or
--command-b. Exit codes: 0 no difference beyond noise, 1 the variants differ (with
--fail-on-difference), 2 usage, 3 the variants could not be run or compared.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    t = sub.add_parser(
        "trace-diff",
        help="run a good and a bad variant of a training; name the first call or tensor that differs",
        description="Run COMMAND (the good variant, twice: its own noise) and the other variant (another "
        "revision, command or interpreter) for a few steps under a tracer with pinned seeds; align the two "
        "traces and report the first difference beyond noise, with its call site in each, and the "
        "invariants of the good run that the other breaks.",
    )
    t.add_argument("command", help="the training command of the good variant, quoted, e.g. 'python train.py'")
    t.add_argument("--rev-a", help="the good git revision (with --rev-b: COMMAND runs at both)")
    t.add_argument("--rev-b", help="the other git revision")
    t.add_argument("--command-b", help="the other variant's command (instead of revisions)")
    t.add_argument("--python", default=None, help="interpreter (default: ./.venv if present, else this one)")
    t.add_argument("--python-b", default=None, help="the other variant's interpreter, if not --python's")
    t.add_argument("--steps", type=int, default=5, help="training steps traced (default 5, at most 50)")
    t.add_argument("--start", type=int, default=1, help="the first training step traced (default 1)")
    t.add_argument("--cwd", default=None, help="folder the command runs in (default: the current one)")
    t.add_argument("--timeout", type=float, default=600.0, metavar="S", help="per run (default 600)")
    t.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    t.add_argument("--fail-on-difference", action="store_true", help="exit 1 when the variants differ")
    t.set_defaults(func=run_trace_diff_cli)


def _error(args: argparse.Namespace, message: str, next_step: str | None, detail: str | None = None) -> int:
    from trainsleuth.cli import EXIT_ERROR

    if args.json:
        print(
            json.dumps({"ok": False, "error": {"message": message, "next_step": next_step, "detail": detail}})
        )
    print(f"trainsleuth trace-diff: {message}", file=sys.stderr)
    if detail and not args.json:
        print(detail[-1500:], file=sys.stderr)
    if next_step:
        print(f"next step: {next_step}", file=sys.stderr)
    return EXIT_ERROR


def run_trace_diff_cli(args: argparse.Namespace) -> int:
    from trainsleuth.cli import EXIT_EXPECTATION, EXIT_OK, EXIT_USAGE
    from trainsleuth.tools.interpreter import InterpreterError, resolve_interpreter
    from trainsleuth.tools.trace import Reporter, TraceDiffError, plan_trace_diff, render_text, run_trace_diff

    if not 1 <= args.steps <= 50:
        print("trainsleuth trace-diff: --steps must be 1..50", file=sys.stderr)
        return EXIT_USAGE
    if args.command_b and (args.rev_a or args.rev_b):
        print("trainsleuth trace-diff: give --rev-a/--rev-b or --command-b, not both", file=sys.stderr)
        return EXIT_USAGE
    here = Path.cwd()
    cwd = Path(args.cwd).resolve() if args.cwd else here
    if not cwd.is_dir():
        return _error(args, f"--cwd {args.cwd} is not a folder", "pass the folder the command runs in")
    try:
        python_a = resolve_interpreter(args.python, cwd)
        python_b = resolve_interpreter(args.python_b, cwd) if args.python_b else None
    except InterpreterError as exc:
        return _error(args, str(exc), "pass an existing interpreter with --python / --python-b")
    workspace = cwd if not (args.rev_a or args.rev_b) else _top(cwd)
    try:
        plan = plan_trace_diff(
            workspace=workspace,
            cwd=cwd,
            command=None if args.command_b else args.command,
            rev_a=args.rev_a,
            rev_b=args.rev_b,
            command_a=args.command if args.command_b else None,
            command_b=args.command_b,
            python_a=python_a,
            python_b=python_b,
            steps=args.steps,
            timeout_s=args.timeout,
            start=args.start,
        )
        progress = None if args.json else (lambda d, t, m: print(f"[{d:g}/{t:g}] {m}", file=sys.stderr))
        report = run_trace_diff(plan, Reporter(progress=progress))
    except TraceDiffError as exc:
        return _error(args, exc.message, exc.next_step, exc.detail)
    if args.json:
        print(json.dumps({"ok": True, **report.model_dump(mode="json")}))
    else:
        print(render_text(report))
    if args.fail_on_difference and report.verdict == "differs":
        return EXIT_EXPECTATION
    return EXIT_OK


def _top(cwd: Path) -> Path:
    """The repository's top folder (the revisions' checkouts copy it), else the folder itself."""
    import subprocess

    proc = subprocess.run(
        ["git", "-C", str(cwd), "rev-parse", "--show-toplevel"], capture_output=True, text=True
    )
    return Path(proc.stdout.strip()).resolve() if proc.returncode == 0 and proc.stdout.strip() else cwd

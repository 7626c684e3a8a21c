"""`trainsleuth probe -- COMMAND`: watch the user's own training run and report gradient findings.

trainsleuth probe [--steps N] [--start K] [--json] -- python train.py --config c.yaml
trainsleuth probe train.py:make_probe [--steps N] [--python PYTHON] [--timeout S]
                  [--memory-limit MB] [--json] [--plot out.png] [--fail-on LEVEL]
trainsleuth probe --read RUN_DIR      # a live-mode run written by trainsleuth.probe.attach
trainsleuth probe --scaffold train.py [--script-args '...']   # a training script as it is
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from trainsleuth.cli._options import add_fail_on


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "probe",
        help="watch a training run for a few steps and report gradient findings",
        usage="trainsleuth probe [options] -- COMMAND...\n       trainsleuth probe [options] ENTRYPOINT",
        description="Run your own training command (after --) in a scratch copy of the project, watch optimizer "
        "steps START..START+STEPS-1 of the real loop, stop it and report gradient findings per parameter: "
        "NaN/Inf origins (module and operation), parameters that get no or exactly-zero gradient, are in no "
        "optimizer or never move, dead or vanishing paths, loss and label mistakes. With ENTRYPOINT instead, "
        "a function's model runs a few steps on one fixed batch.",
    )
    p.add_argument("entrypoint", nargs="?", help="path/to/file.py:function or package.module:function")
    p.add_argument(
        "--steps",
        type=int,
        default=8,
        help="optimizer steps observed (ENTRYPOINT: steps on one batch; default 8)",
    )
    p.add_argument("--start", type=int, default=1, help="with a command: the first optimizer step observed")
    p.add_argument(
        "--python",
        default=None,
        help="interpreter that runs the model (default: ./.venv if present, else this one)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="kill the run after S seconds (default: 600 with a command, 300 with an entrypoint)",
    )
    p.add_argument(
        "--memory-limit", type=float, default=None, metavar="MB", help="kill the run above MB resident memory"
    )
    p.add_argument(
        "--json", action="store_true", help="print one JSON object (its 'findings' list) on stdout"
    )
    p.add_argument("--plot", default=None, metavar="PNG", help="write a PNG of per-layer gradient norms")
    add_fail_on(p)
    p.add_argument(
        "--read", default=None, metavar="RUN_DIR", help="read a live-mode run folder instead of probing"
    )
    p.add_argument(
        "--scaffold",
        default=None,
        metavar="SCRIPT",
        help="write an entrypoint for a training script under .trainsleuth/scratch/ and probe it",
    )
    p.add_argument(
        "--script-args",
        default="",
        metavar="ARGS",
        help="arguments for the scaffolded script, one string (e.g. '--batch_size=4 --compile=False')",
    )
    p.set_defaults(func=run)


def _fails(findings: list[Any], level: str) -> bool:
    if level == "never":
        return False
    rank = {"info": 0, "warning": 1, "error": 2}
    return any(rank[f.severity] >= rank[level] for f in findings)


def _error(
    args: argparse.Namespace,
    kind: str,
    message: str,
    next_step: str | None = None,
    traceback: str | None = None,
) -> int:
    from trainsleuth.cli import EXIT_ERROR

    if args.json:
        error = {"kind": kind, "message": message, "next_step": next_step, "traceback": traceback}
        print(json.dumps({"ok": False, "error": error}))
    print(f"trainsleuth probe: {message}", file=sys.stderr)
    if next_step:
        print(f"next step: {next_step}", file=sys.stderr)
    return EXIT_ERROR


def _probe_command(args: argparse.Namespace) -> int | None:
    """`trainsleuth probe -- COMMAND`: sets args.report, or returns the exit code of a failure."""
    from trainsleuth.cli import EXIT_USAGE
    from trainsleuth.tools.interpreter import InterpreterError, resolve_interpreter
    from trainsleuth.tools.probe.observed import probe_command
    from trainsleuth.tools.probe.report import ProbeError, render_report

    if not args.user_command:
        print(
            "trainsleuth probe: give the training command after --, e.g. -- python train.py", file=sys.stderr
        )
        return EXIT_USAGE
    if not 1 <= args.steps <= 200 or args.start < 1:
        print("trainsleuth probe: --steps must be between 1 and 200 and --start at least 1", file=sys.stderr)
        return EXIT_USAGE
    cwd = Path.cwd()
    try:
        python = resolve_interpreter(args.python, cwd)
    except InterpreterError as exc:
        return _error(args, "interpreter_failed", str(exc), "pass an existing interpreter with --python")
    workspace = _workspace(cwd)
    if not args.json:
        print(
            f"Running {' '.join(args.user_command)} under the observer (steps {args.start}..{args.start + args.steps - 1})",
            file=sys.stderr,
        )
    try:
        report = probe_command(
            args.user_command,
            python=python,
            workspace=workspace,
            steps=args.steps,
            start=args.start,
            timeout_s=args.timeout or 600.0,
            memory_limit_mb=args.memory_limit,
            cwd=cwd,
        )
    except ProbeError as exc:
        message = exc.message
        if exc.detail and not args.json:
            message += "\n" + exc.detail[-4000:]
        return _error(args, exc.kind, message, exc.next_step, exc.detail)
    if args.json:
        print(json.dumps({"ok": True, **report.model_dump(mode="json"), "healthy": report.healthy}))
    else:
        print(render_report(report))
    args.report = report
    return None


def _workspace(cwd: Path) -> Path:
    """The project the command belongs to: the git work tree around the current folder, else the folder."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=cwd, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return cwd
    top = out.stdout.strip()
    return Path(top) if out.returncode == 0 and top else cwd


def run(args: argparse.Namespace) -> int:
    from trainsleuth.cli import EXIT_EXPECTATION, EXIT_OK, EXIT_USAGE
    from trainsleuth.tools.probe.plot import grad_norm_png
    from trainsleuth.tools.probe.report import ProbeError, render_report, run_probe

    if args.read:
        from trainsleuth.tools.probe.live import read_probe_run

        try:
            live = read_probe_run(Path(args.read))
        except ProbeError as exc:
            return _error(args, exc.kind, exc.message, exc.next_step)
        if args.json:
            print(json.dumps({"ok": True, **live.model_dump(mode="json"), "healthy": live.healthy}))
        else:
            from trainsleuth.tools.probe.report import finding_lines

            print(f"Live probe run {live.run_dir}: {live.steps_recorded} recorded step(s).")
            for f in live.findings:
                print("\n".join(finding_lines(f)))
            if live.healthy:
                print("No warnings or errors.")
        layers = live.layer_grad_rms
        findings = live.findings
    elif getattr(args, "user_command", None) is not None:
        if args.entrypoint or args.scaffold:
            print(
                "trainsleuth probe: give a command after --, or ENTRYPOINT, or --scaffold, not several",
                file=sys.stderr,
            )
            return EXIT_USAGE
        code = _probe_command(args)
        if code is not None:
            return code
        layers, findings = args.report.layer_grad_rms, args.report.findings
    else:
        scaffold = None
        if args.scaffold:
            import shlex

            from trainsleuth.tools.probe.scaffold import write_scaffold

            try:
                scaffold = write_scaffold(Path(args.scaffold), Path.cwd(), shlex.split(args.script_args))
            except ProbeError as exc:
                return _error(args, exc.kind, exc.message, exc.next_step)
            except ValueError as exc:
                return _error(
                    args, "bad_scaffold", f"--script-args: {exc}", "quote the arguments as one string"
                )
            args.entrypoint = scaffold.entrypoint
            if not args.json:
                print(
                    f"Wrote {scaffold.path} (entrypoint {scaffold.entrypoint}); probing it.", file=sys.stderr
                )
        if not args.entrypoint:
            print(
                "trainsleuth probe: give ENTRYPOINT (path/to/file.py:function), --scaffold SCRIPT or --read RUN_DIR",
                file=sys.stderr,
            )
            return EXIT_USAGE
        if not 1 <= args.steps <= 200:
            print("trainsleuth probe: --steps must be between 1 and 200", file=sys.stderr)
            return EXIT_USAGE
        from trainsleuth.tools.interpreter import InterpreterError, resolve_interpreter

        cwd = Path.cwd()
        try:
            python = resolve_interpreter(args.python, cwd)
        except InterpreterError as exc:
            return _error(args, "interpreter_failed", str(exc), "pass an existing interpreter with --python")
        try:
            report = run_probe(
                args.entrypoint,
                python=python,
                cwd=cwd,
                steps=args.steps,
                timeout_s=args.timeout or 300.0,
                memory_limit_mb=args.memory_limit,
            )
        except ProbeError as exc:
            message = exc.message
            if exc.detail and not args.json:
                message += "\n" + exc.detail[-4000:]
            return _error(args, exc.kind, message, exc.next_step, exc.detail)
        if args.json:
            extra = {"scaffold": scaffold.model_dump()} if scaffold else {}
            print(
                json.dumps({"ok": True, **report.model_dump(mode="json"), "healthy": report.healthy, **extra})
            )
        else:
            print(render_report(report))
        layers = report.layer_grad_rms
        findings = report.findings
    if args.plot:
        from trainsleuth.tools.extras import MissingExtra

        try:
            png = grad_norm_png(layers)
        except MissingExtra as exc:
            print(f"trainsleuth probe: no plot written: {exc.message}", file=sys.stderr)
            png = b""
        if png is None:
            print("trainsleuth probe: no gradient norms to plot", file=sys.stderr)
        elif png:
            Path(args.plot).write_bytes(png)
    return EXIT_EXPECTATION if _fails(findings, args.fail_on) else EXIT_OK

"""`trainsleuth demo`: the whole protocol end to end on the bundled broken training example."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="the whole protocol end to end on a bundled example",
        description="A real MCP client drives `trainsleuth serve` over stdio through a whole investigation of "
        "a small broken training script (loss turns NaN): log analysis, probe, hypotheses, diagnosis, "
        "approval, fix, verification, knowledge capture. Works on a scratch copy; prints a transcript and "
        "writes the plot and the report.",
    )
    p.add_argument(
        "--out", default=None, metavar="DIR", help="output folder (default: a new temporary folder)"
    )
    p.add_argument(
        "--example", default=None, metavar="PATH", help="the example folder (default: examples/demo)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import anyio

    from trainsleuth.clients.demo import DemoFailure, default_out_dir, run_demo

    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:  # tool output may hold characters a legacy console cannot show
        reconfigure(errors="replace")
    out = Path(args.out).absolute() if args.out else default_out_dir()
    example = Path(args.example).absolute() if args.example else None
    try:
        anyio.run(lambda: run_demo(out, example=example))
    except DemoFailure as exc:
        print(f"trainsleuth demo FAILED: {exc}", file=sys.stderr)
        print(f"(partial output in {out})", file=sys.stderr)
        return 3
    except Exception as exc:
        detail = "; ".join(str(e) for e in getattr(exc, "exceptions", [exc]))
        print(f"trainsleuth demo FAILED: {type(exc).__name__}: {detail}", file=sys.stderr)
        print(f"(partial output in {out})", file=sys.stderr)
        return 3
    return 0

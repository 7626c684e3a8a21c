"""Edit-gate shell analysis: work grows linearly with the command's length.

A command line of k copies of a block of realistic commands (the read corpus of
tests/adversarial/hook_corpus.py joined with `;`) is analysed for k = N and k = 10 N, side by side.
The figure is t(10 N) / (10 t(N)): 1.0 is perfectly linear, a quadratic analysis gives ~10.
Goal: at most 1.5. The same ratio for the tokenizer the gate used before (shlex with punctuation
characters, kept here only as the baseline) shows what the parser replaced.

    python -m benchmarks.hook [--copies 40]
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from benchmarks.common import BenchResult, result, time_side_by_side

GOAL = 1.5
ROOT = Path(__file__).resolve().parent.parent


def _block() -> str:
    sys.path.insert(0, str(ROOT / "tests" / "adversarial"))
    from hook_corpus import READS

    return "; ".join(c for c in READS if "\n" not in c and not c.rstrip().endswith("&")) + "\n"


def _old_tokenizer(command: str) -> int:
    """The gate's former tokenizer (shlex, punctuation characters), for the baseline ratio only."""
    count = 0
    for line in command.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        lexer.commenters = ""
        count += sum(1 for _ in lexer)
    return count


def _scaling(fn: object, small: str, large: str, repeats: int) -> tuple[float, float, float]:
    t_large, t_small = time_side_by_side(lambda: fn(large), lambda: fn(small), repeats=repeats)  # type: ignore[operator]
    return t_large / (10 * t_small), t_small, t_large


def _best_scaling(fn: object, small: str, large: str, repeats: int) -> tuple[float, float, float]:
    """Like `_scaling` with the fastest of interleaved runs: millisecond timings on a shared machine are
    dominated by other processes, and the minimum is the run they disturbed least."""
    t_small = t_large = float("inf")
    for _ in range(repeats):
        for text in (small, large):
            t0 = time.perf_counter()
            fn(text)  # type: ignore[operator]
            elapsed = time.perf_counter() - t0
            if text is small:
                t_small = min(t_small, elapsed)
            else:
                t_large = min(t_large, elapsed)
    return t_large / (10 * t_small), t_small, t_large


def run_benchmark(quick: bool = False, copies: int | None = None) -> list[BenchResult]:
    from trainsleuth.clients.gate.shell import analyse

    block = _block()
    n = copies or (10 if quick else 40)
    small, large = block * n, block * (10 * n)
    repeats = 3 if quick else 5
    ratio, t_small, t_large = _scaling(analyse, small, large, repeats)
    old_ratio, old_small, old_large = _scaling(_old_tokenizer, small, large, repeats)
    command = "python -m benchmarks.hook" + (f" --copies {copies}" if copies else "")

    # One very long argument (a long quoted string, as in a heredoc-free `echo '...'` or `python -c`):
    # the former tokenizer grew a token one character at a time, which is quadratic.
    def arg(size: int) -> str:
        return "echo '" + "x" * size + "' > logs/a.log"

    size = 3_000 if quick else 30_000
    arg_small, arg_large = arg(size), arg(10 * size)  # fastest of 15 interleaved runs each
    arg_ratio, arg_t_small, arg_t_large = _best_scaling(analyse, arg_small, arg_large, 15)
    # Past a few hundred kB the parser's own cost per character rises (one multi-megabyte token no
    # longer fits the caches): 3 MB is timed too and reported as is.
    _, _, t_3mb = _best_scaling(analyse, arg(30_000), arg(3_000_000), 3)
    # The former tokenizer is too slow for these sizes: it is timed on 10 kB and 100 kB.
    old_arg_ratio, old_arg_small, old_arg_large = _scaling(_old_tokenizer, arg(10_000), arg(100_000), repeats)
    return [
        result(
            "edit-gate shell analysis, one long argument: time for 10x the length / 10x the time",
            arg_ratio,
            f"the same analysis on a {len(arg_small):,}-character argument ({arg_t_small * 1000:.2f} ms)",
            GOAL,
            direction="lower",
            unit="x (1.0 = linear)",
            details=(
                f"{len(arg_small):,} chars: {arg_t_small * 1000:.2f} ms, {len(arg_large):,} chars: "
                f"{arg_t_large * 1000:.2f} ms, 3,000,020 chars: {t_3mb * 1000:.0f} ms; former shlex tokenizer, 10 kB -> 100 kB: {old_arg_small * 1000:.1f} ms -> "
                f"{old_arg_large * 1000:.1f} ms, ratio {old_arg_ratio:.2f} (quadratic)"
            ),
            command=command,
        ),
        result(
            "edit-gate shell analysis: time for 10x the command / 10x the time (linear = 1.0)",
            ratio,
            f"the same analysis on {len(small):,} characters ({t_small * 1000:.1f} ms)",
            GOAL,
            direction="lower",
            unit="x (1.0 = linear)",
            details=(
                f"{len(small):,} chars: {t_small * 1000:.1f} ms, {len(large):,} chars: {t_large * 1000:.1f} ms "
                f"(median of {repeats}); former shlex tokenizer on the same inputs: "
                f"{old_small * 1000:.1f} ms -> {old_large * 1000:.1f} ms, ratio {old_ratio:.2f}"
            ),
            command=command,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=None)
    args = parser.parse_args()
    print(json.dumps(run_benchmark(copies=args.copies), indent=2))


if __name__ == "__main__":
    main()

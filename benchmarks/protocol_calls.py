"""Protocol calls per resolved investigation, beyond the diagnostic calls (issue 22.3; goal <= 6).

Runs `trainsleuth demo` (a real MCP client driving a real `trainsleuth serve` over stdio through one
investigation of examples/demo, from the symptom to a verified fix and the closing report) and counts
the calls it makes to protocol tools (start_investigation ... capture_knowledge). Diagnostic calls
(analyze_training_log, probe_gradients, ...) are counted apart: they are the work itself.

    python -m benchmarks.protocol_calls
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from benchmarks.common import BenchResult, result

GOAL = 6
COMMAND = "python -m benchmarks.protocol_calls"
# Measured on main at 931f6bd (before issue 22.3), with this same command.
BEFORE = 9
PROTOCOL_TOOLS = frozenset(
    {
        "start_investigation",
        "get_investigation",
        "list_investigations",
        "record_evidence",
        "propose_hypotheses",
        "resolve_hypothesis",
        "submit_diagnosis",
        "approve_diagnosis",
        "record_review",
        "begin_fix",
        "verify_fix",
        "capture_knowledge",
    }
)


def count_demo_calls() -> tuple[list[str], list[str]]:
    """(protocol calls, diagnostic calls) of one demo run, in order."""
    import anyio

    from trainsleuth.clients.demo import run_demo

    with tempfile.TemporaryDirectory(prefix="bench-calls-") as tmp:
        res = anyio.run(lambda: run_demo(Path(tmp) / "out", emit=lambda _line: None))
    protocol = [c for c in res.calls if c in PROTOCOL_TOOLS]
    diagnostic = [c for c in res.calls if c not in PROTOCOL_TOOLS]
    return protocol, diagnostic


def run_benchmark(quick: bool = False) -> BenchResult:
    protocol, diagnostic = count_demo_calls()
    return result(
        "protocol calls per resolved investigation (the demo)",
        float(len(protocol)),
        f"{BEFORE} calls before issue 22.3 (main at 931f6bd)",
        GOAL,
        direction="lower",
        unit="calls",
        details=f"protocol: {', '.join(protocol)}; diagnostic: {', '.join(diagnostic)}",
        command=COMMAND,
    )


def main() -> None:
    argparse.ArgumentParser(description=__doc__).parse_args()
    protocol, diagnostic = count_demo_calls()
    print(f"protocol calls: {len(protocol)} ({', '.join(protocol)})")
    print(f"diagnostic calls: {len(diagnostic)} ({', '.join(diagnostic)})")
    print(f"goal: <= {GOAL}; before issue 22.3: {BEFORE}")


if __name__ == "__main__":
    main()

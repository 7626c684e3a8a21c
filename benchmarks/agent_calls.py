"""Protocol calls per resolved investigation on the agent benchmark (issue 22.3; goal <= 6).

The playbooks of `benchmarks/agent/cases/*/playbook.yaml` run through the real CLI; see
`benchmarks/agent/playbooks.py` for what is counted.

    python -m benchmarks.agent.playbooks      # the per-case table
"""

from __future__ import annotations

from typing import Any


def run_benchmark(quick: bool = False) -> Any:
    from benchmarks.agent.playbooks import run_benchmark as run

    return run(quick)

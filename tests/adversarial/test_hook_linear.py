"""The shell analysis does work linear in the command's length (counted, not timed).

`Analysis.steps` counts the syntax nodes the analysis visits and the bytes it parses (again, for
`bash -c` payloads and scripts). For commands made of k copies of a block, steps/k must stay
constant; a quadratic walk (the old shlex tokenizer re-scanned the rest of the line per token) would
grow with k. Timing the same inputs is `benchmarks/hook.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hook_corpus import READS, WRITES
from hook_helpers import claude_event, claude_verdict, make_workspace, open_investigation

from trainsleuth.clients.gate.shell import MAX_DEPTH, analyse
from trainsleuth.clients.hooks import run_hook

BLOCKS = {
    "reads": "; ".join(c for c in READS if "\n" not in c) + "\n",
    "writes": "; ".join(c for c in WRITES if "\n" not in c and "&" not in c.rstrip("&")) + "\n",
    "nested payloads": "bash -c \"sh -c 'echo $(git log | head) > logs/x.log'\"; ",
    "pipeline": "cat train.py | grep lr | sort | uniq -c | tee logs/a.log | head; ",
}


@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_work_per_copy_is_constant(block: str) -> None:
    text = BLOCKS[block]
    per_copy = []
    for copies in (5, 20, 80):
        per_copy.append(analyse(text * copies).steps / copies)
    # Constant work per copy: at most a few percent apart (a quadratic walk grows 16x from 5 to 80).
    assert max(per_copy) / min(per_copy) < 1.05, per_copy


def test_nesting_is_bounded() -> None:
    """Text parsed again (bash -c inside bash -c ...) stops at MAX_DEPTH and counts as a write."""
    command = "rm train.py"
    for _ in range(MAX_DEPTH + 3):
        command = "bash -c " + "'" + command.replace("'", "'\\''") + "'"
    result = analyse(command)
    assert any(w.path is None and "nested" in w.why for w in result.writes)
    deep = "echo " + "$(echo " * 500 + "x" + ")" * 500
    assert any(w.path is None for w in analyse(deep).writes)


def test_a_huge_command_is_decided(tmp_path: Path) -> None:
    """A 1 MB argument (the old gate's shlex tokenizer was quadratic on long tokens: minutes) is judged."""
    ws = make_workspace(tmp_path / "proj")
    open_investigation(ws)
    command = "echo '" + "x" * 1_000_000 + "' > train.py"
    outcome = run_hook("claude-code", claude_event(ws, "Bash", {"command": command}))
    assert claude_verdict(outcome.stdout, outcome.exit_code) == "deny"
    assert "train.py" in outcome.stdout

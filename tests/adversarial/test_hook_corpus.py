"""The edit gate over a labelled corpus: no write gets through, and reading is not blocked.

Every command of hook_corpus.py is sent as a real Claude Code PreToolUse payload to the hook
(`run_hook`, what `trainsleuth hook claude-code` runs) in a real workspace with a real open
investigation (no approved diagnosis). False allows must be zero; false denies are counted and
bounded, and the ones the gate accepts knowingly are listed with the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hook_corpus import READS, STATE_WRITES, WRITES
from hook_helpers import (
    STATE_ENV,
    claude_event,
    claude_verdict,
    make_workspace,
    shared_workspace,
)

from trainsleuth.clients.hooks import run_hook

# Reads the gate denies on purpose, and why (they count as false denies in the report).
KNOWN_FALSE_DENIES: dict[str, str] = {
    'python -c "import torch; print(torch.__version__, torch.cuda.is_available())"': "inline code can "
    "write anything and the gate cannot inspect it (a script in .trainsleuth/scratch/ runs)",
    "python -c 'import transformers; print(transformers.__version__)'": "inline code, as above",
}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    return shared_workspace(tmp_path_factory.mktemp("corpus"))


@pytest.fixture
def workspace(shared: tuple[Path, str, Path], monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    monkeypatch.setenv(STATE_ENV, str(shared[2]))
    return shared[0], shared[1]


def _verdicts(ws: Path, commands: list[str]) -> dict[str, str]:
    out = {}
    for command in commands:
        outcome = run_hook("claude-code", claude_event(ws, "Bash", {"command": command}))
        out[command] = claude_verdict(outcome.stdout, outcome.exit_code)
    return out


def test_corpus_is_large_and_labelled_once() -> None:
    assert len(READS) >= 100 and len(WRITES) >= 100
    assert not set(READS) & set(WRITES)
    assert len(set(READS)) == len(READS) and len(set(WRITES)) == len(WRITES)


def test_no_write_gets_through(workspace: tuple[Path, str]) -> None:
    ws, _ = workspace
    verdicts = _verdicts(ws, WRITES)
    false_allows = [c for c, v in verdicts.items() if v != "deny"]
    assert false_allows == [], f"{len(false_allows)}/{len(WRITES)} writes allowed: {false_allows}"


def test_reads_and_runs_are_not_blocked(workspace: tuple[Path, str]) -> None:
    ws, _ = workspace
    verdicts = _verdicts(ws, READS)
    false_denies = [c for c, v in verdicts.items() if v != "allow"]
    unexplained = [c for c in false_denies if c not in KNOWN_FALSE_DENIES]
    rate = len(false_denies) / len(READS)
    print(f"false denies: {len(false_denies)}/{len(READS)} ({rate:.1%})")
    assert unexplained == [], f"reads denied: {unexplained}"
    assert sorted(false_denies) == sorted(KNOWN_FALSE_DENIES)  # the known ones are still denied


def test_a_denial_says_why_and_what_to_do(workspace: tuple[Path, str]) -> None:
    ws, iid = workspace
    outcome = run_hook("claude-code", claude_event(ws, "Bash", {"command": "git -C . checkout -- train.py"}))
    reason = outcome.stdout
    assert iid in reason and "without an approved diagnosis" in reason
    assert "train.py" in reason and "git checkout" in reason and "Next step:" in reason
    inline = run_hook("claude-code", claude_event(ws, "Bash", {"command": "python -c 'print(1)'"}))
    assert "python -c" in inline.stdout and "cannot inspect" in inline.stdout


def test_without_an_investigation_only_the_state_is_protected(tmp_path: Path) -> None:
    """No open investigation: every write is allowed except the server's own state."""
    ws = make_workspace(tmp_path / "proj")
    state_writes = STATE_WRITES
    assert set(STATE_WRITES) <= set(WRITES)
    verdicts = _verdicts(ws, WRITES)
    assert [c for c in state_writes if verdicts[c] != "deny"] == []
    assert [c for c, v in verdicts.items() if v != "allow" and c not in state_writes] == []
    assert not (ws / ".trainsleuth" / "state.db").exists()  # the hook never creates state

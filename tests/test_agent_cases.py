"""The agent benchmark's repositories are real: each builds as a git repository with its history, the
user's check.sh untracked beside it, and a fix.patch that applies. That check.sh fails as built and
passes with the fix is asserted by the playbooks (tests/test_agent_playbooks.py): every case has one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks.agent.build import CASES, PLAYBOOKS_PENDING, build_case, case_names, playbook_cases


def test_every_case_has_its_parts_and_a_playbook() -> None:
    assert len(case_names()) >= 11
    for name in case_names():
        for part in ("ISSUE.md", "check.sh", "ANSWER.md", "fix.patch", "playbook.yaml"):
            assert (CASES / name / part).is_file(), f"{name} lacks {part}"
    # no case waits for its playbook: the playbooks are what run check.sh unfixed and fixed, so a case
    # listed as pending would have its reproducer proven by nothing
    assert not PLAYBOOKS_PENDING
    assert playbook_cases() == case_names()


@pytest.mark.parametrize("name", case_names())
def test_each_case_builds_as_a_repository_with_history_and_an_untracked_reproducer(
    name: str, tmp_path: Path
) -> None:
    """That check.sh fails on the built repo and passes with fix.patch is proven by the case's playbook
    (tests/test_agent_playbooks.py): submit_diagnosis runs it unfixed, verify_fix after the patch."""
    repo = build_case(name, tmp_path / name)
    log = subprocess.run(["git", "log", "--oneline"], cwd=repo, capture_output=True, text=True, check=True)
    assert len(log.stdout.splitlines()) >= 2
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True)
    assert status.stdout.strip() == "?? check.sh"  # the user's reproducer is theirs, untracked
    applies = subprocess.run(
        ["git", "apply", "--check", str(CASES / name / "fix.patch")], cwd=repo, capture_output=True, text=True
    )
    assert applies.returncode == 0, applies.stderr

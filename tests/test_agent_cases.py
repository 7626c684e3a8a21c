"""The agent benchmark's repositories are real: each builds as a git repository with its history, the
user's check.sh untracked beside it, and a fix.patch that applies. That check.sh fails as built and
passes with the fix is asserted by the playbooks (tests/test_agent_playbooks.py) and, for the cases
whose playbook is still pending (build.PLAYBOOKS_PENDING), by running check.sh here."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks.agent.build import CASES, PLAYBOOKS_PENDING, build_case, case_names, playbook_cases
from benchmarks.agent.playbooks import case_env


def test_every_case_has_its_parts_and_a_playbook_unless_listed_as_pending() -> None:
    assert len(case_names()) >= 11
    for name in case_names():
        for part in ("ISSUE.md", "check.sh", "ANSWER.md", "fix.patch"):
            assert (CASES / name / part).is_file(), f"{name} lacks {part}"
    without_playbook = {name for name in case_names() if not (CASES / name / "playbook.yaml").is_file()}
    # exactly the declared ones: a new case without a playbook, or a pending one that got its
    # playbook, must update build.PLAYBOOKS_PENDING (and so the playbook tests' list)
    assert without_playbook == PLAYBOOKS_PENDING
    assert set(playbook_cases()) == set(case_names()) - PLAYBOOKS_PENDING


@pytest.mark.parametrize("name", case_names())
def test_each_case_builds_as_a_repository_with_history_and_an_untracked_reproducer(
    name: str, tmp_path: Path
) -> None:
    """That check.sh fails on the built repo and passes with fix.patch is proven by the case's playbook
    (tests/test_agent_playbooks.py): submit_diagnosis runs it unfixed, verify_fix after the patch;
    for a case without a playbook yet, by test_pending_case_check_fails_unfixed_and_passes_fixed."""
    repo = build_case(name, tmp_path / name)
    log = subprocess.run(["git", "log", "--oneline"], cwd=repo, capture_output=True, text=True, check=True)
    assert len(log.stdout.splitlines()) >= 2
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True)
    assert status.stdout.strip() == "?? check.sh"  # the user's reproducer is theirs, untracked
    applies = subprocess.run(
        ["git", "apply", "--check", str(CASES / name / "fix.patch")], cwd=repo, capture_output=True, text=True
    )
    assert applies.returncode == 0, applies.stderr


def _check(repo: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["./check.sh"],
        cwd=repo,
        env=case_env(tmp_path / "state"),
        capture_output=True,
        text=True,
        timeout=400,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", sorted(PLAYBOOKS_PENDING))
def test_pending_case_check_fails_unfixed_and_passes_fixed(name: str, tmp_path: Path) -> None:
    """What a playbook's submit_diagnosis/verify_fix would prove, until the case has one: the user's
    check.sh exits 1 on the repository as built (the bug, not a crash: 2 or more would be a broken
    reproducer) and 0 after `git apply fix.patch` (the fixed tree is the healthy twin)."""
    repo = build_case(name, tmp_path / name)
    broken = _check(repo, tmp_path)
    assert broken.returncode == 1, broken.stdout[-3000:] + broken.stderr[-3000:]
    subprocess.run(["git", "apply", str(CASES / name / "fix.patch")], cwd=repo, check=True)
    fixed = _check(repo, tmp_path)
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]

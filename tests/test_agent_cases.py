"""The agent benchmark's repositories are real: each check.sh fails on the built repo and passes with
the case's minimal fix applied, and the history has the commits the answer names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.agent.build import CASES, build_case, case_names


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # One intra-op thread per training process: beside a second pytest worker, torch's default thread
    # pool spins against it and a small GRU runs 30x slower.
    env["OMP_NUM_THREADS"] = "1"
    return env


def _check(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "check.sh"], cwd=repo, env=_env(), capture_output=True, text=True, timeout=600
    )


def test_there_are_seven_cases_of_different_classes() -> None:
    assert len(case_names()) >= 5
    for name in case_names():
        for part in ("ISSUE.md", "check.sh", "ANSWER.md", "fix.patch"):
            assert (CASES / name / part).is_file(), f"{name} lacks {part}"


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", case_names())
def test_check_fails_before_and_passes_after_the_fix(name: str, tmp_path: Path) -> None:
    repo = build_case(name, tmp_path / name)
    log = subprocess.run(["git", "log", "--oneline"], cwd=repo, capture_output=True, text=True, check=True)
    assert len(log.stdout.splitlines()) >= 2
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True)
    assert status.stdout.strip() == "?? check.sh"  # the user's reproducer is theirs, untracked

    before = _check(repo)
    assert before.returncode == 1, before.stdout + before.stderr

    subprocess.run(["git", "apply", str(CASES / name / "fix.patch")], cwd=repo, check=True)
    after = _check(repo)
    assert after.returncode == 0, after.stdout + after.stderr

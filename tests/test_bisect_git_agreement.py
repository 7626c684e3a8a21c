"""bisect_commits must agree with real `git bisect run` on the same history: the same first bad
commit, the same number of runs, and the very same commits tested in the same order (including
with merges, identical timestamps, and skipped commits)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from trainsleuth.tools.bisect.commits import prepare_commit_bisect, run_commit_bisect
from trainsleuth.tools.bisect.common import LocalReporter
from trainsleuth.tools.bisect.select import choose_next, estimate_steps
from trainsleuth.tools.bisect.testing import make_history


def git_bisect_run(src: Path, good: str, bad: str, command: str, tmp: Path) -> dict[str, Any]:
    """Run the real `git bisect run` in a separate clone; return its verdict and tested commits."""
    clone = tmp / "git-clone"
    subprocess.run(["git", "clone", "-q", str(src), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "bisect", "start", bad, good], check=True, capture_output=True)
    run = subprocess.run(
        ["git", "-C", str(clone), "bisect", "run", "sh", "-c", command],
        capture_output=True,
        text=True,
        cwd=clone,
        check=False,
    )
    log = subprocess.run(
        ["git", "-C", str(clone), "bisect", "log"], capture_output=True, text=True, check=True
    ).stdout
    tested = re.findall(r"^git bisect (?:good|bad|skip) ([0-9a-f]{40})$", log, re.M)
    first = next((ln.split()[0] for ln in run.stdout.splitlines() if "is the first bad commit" in ln), None)
    possible = [ln.strip() for ln in run.stdout.splitlines() if re.fullmatch(r"[0-9a-f]{40}", ln.strip())]
    return {"first": first, "tested": tested, "possible": possible, "stdout": run.stdout}


def ours(repo: Path, good: str, bad: str, command: str) -> dict[str, Any]:
    plan = prepare_commit_bisect(repo, good, bad, command, timeout_s=60)
    return run_commit_bisect(plan, LocalReporter())


CASES = [
    # n commits, bug at, merge every, identical timestamps
    pytest.param(240, 161, 0, False, id="linear-240"),
    pytest.param(200, 1, 0, True, id="linear-200-bug-first-same-time"),
    pytest.param(201, 200, 0, False, id="linear-201-bug-last"),
    pytest.param(210, 97, 6, False, id="merges-210"),
    pytest.param(200, 150, 4, True, id="merges-200-same-time"),
]


@pytest.mark.parametrize(("n", "bug_at", "merge_every", "same_time"), CASES)
def test_same_result_and_runs_as_git_bisect_run(
    tmp_path: Path, n: int, bug_at: int, merge_every: int, same_time: bool
) -> None:
    history = make_history(tmp_path / "repo", n, bug_at, merge_every=merge_every, same_time=same_time)
    command = "test ! -f bug"
    result = ours(history.path, history.good, history.bad, command)
    git = git_bisect_run(history.path, history.good, history.bad, command, tmp_path)

    assert git["first"] == history.bug_commit  # the reference itself is right
    assert result["first_bad_commit"]["hash"] == git["first"]
    tested = [s["commit"] for s in result["steps"] if s["kind"] == "bisect"]
    assert tested == git["tested"]
    assert result["bisect_runs"] == len(git["tested"])
    # Endpoint checks only happen when no candidate passed (bug right after good) or none failed.
    expected_checks = int(bug_at == 1) + int(bug_at == n - 1)
    assert result["verification_runs"] == expected_checks
    assert result["runs"] == len(git["tested"]) + expected_checks
    assert result["candidates"] == int(
        subprocess.run(
            ["git", "-C", str(history.path), "rev-list", "--count", history.bad, f"^{history.good}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )


SKIP_COMMAND = "c=$(cat counter.txt); if [ $((c % {mod})) -eq {rem} ]; then exit 125; fi; test ! -f bug"


@pytest.mark.parametrize(
    ("n", "bug_at", "merge_every", "mod", "rem"),
    [
        pytest.param(200, 137, 0, 3, 0, id="every-third-skipped"),
        pytest.param(200, 50, 0, 2, 1, id="odd-skipped-ambiguous"),
        pytest.param(150, 100, 5, 2, 0, id="merges-with-skips"),
    ],
)
def test_skips_follow_git_exactly(
    tmp_path: Path, n: int, bug_at: int, merge_every: int, mod: int, rem: int
) -> None:
    history = make_history(tmp_path / "repo", n, bug_at, merge_every=merge_every)
    command = SKIP_COMMAND.format(mod=mod, rem=rem)
    result = ours(history.path, history.good, history.bad, command)
    git = git_bisect_run(history.path, history.good, history.bad, command, tmp_path)

    tested = [s["commit"] for s in result["steps"] if s["kind"] == "bisect"]
    assert tested == git["tested"]
    assert any(s["verdict"] == "skip" and s["exit_code"] == 125 for s in result["steps"])
    first = result["first_bad_commit"]["hash"] if result["first_bad_commit"] else None
    assert first == git["first"]
    assert sorted(result["possible_first_bad"]) == sorted(git["possible"])
    if first is None:
        assert history.bug_commit in result["possible_first_bad"]
        assert "only skipped commits are left" in result["conclusion"]


def test_selection_on_a_small_linear_history_matches_git_rules() -> None:
    # c1 <- c2 <- ... <- c7 (bad); git tests the oldest commit whose weight is about half.
    order = [f"{i:040x}" for i in range(7, 0, -1)]  # newest first
    parents = {f"{i:040x}": [f"{i - 1:040x}"] if i > 1 else [] for i in range(1, 8)}
    choice = choose_next(order, parents, order[0], set())
    assert choice.commit == f"{3:040x}" and not choice.found and choice.remaining == 7
    only_bad = choose_next([order[0]], {order[0]: []}, order[0], set())
    assert only_bad.found and only_bad.commit == order[0]


def test_step_estimates_are_gits() -> None:
    # git: "Bisecting: N revisions left to test after this (roughly K steps)"
    assert [estimate_steps(n) for n in (1, 2, 3, 4, 5, 6, 7, 8, 200, 1000)] == [0, 0, 1, 1, 1, 2, 2, 2, 7, 9]

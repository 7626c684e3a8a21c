"""bisect_commits as a library: the user's checkout is never touched, bad input is refused with a
next step, hangs and untestable commits are handled as chosen, and env='uv' builds each
candidate's environment from its own uv.lock (cached by lockfile hash)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainsleuth.tools.bisect.commits import prepare_commit_bisect, run_commit_bisect
from trainsleuth.tools.bisect.common import BisectError, LocalReporter
from trainsleuth.tools.bisect.testing import make_history, tree_digest
from trainsleuth.tools.bisect.uvenv import default_python
from trainsleuth.tools.bisect.wheels import build_wheel


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def make_user_state(repo: Path) -> None:
    """A realistic checkout: a stash entry, a staged change, an unstaged change, an untracked file."""
    (repo / "counter.txt").write_text("stashed work\n")
    git(repo, "stash", "push", "-q", "-m", "user's stash")
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    (repo / "counter.txt").write_text("uncommitted edit\n")
    (repo / "notes.txt").write_text("untracked\n")


def run(repo: Path, good: str, bad: str, command: str, **kw: object) -> dict:  # type: ignore[type-arg]
    plan = prepare_commit_bisect(repo, good, bad, command, **kw)  # type: ignore[arg-type]
    return run_commit_bisect(plan, LocalReporter())


def test_user_checkout_is_byte_for_byte_unchanged(tmp_path: Path) -> None:
    history = make_history(tmp_path / "repo", 60, 23)
    make_user_state(history.path)
    before = tree_digest(history.path)
    head_before = git(history.path, "rev-parse", "HEAD")

    result = run(history.path, history.good, "main", "test ! -f bug")

    assert result["first_bad_commit"]["hash"] == history.bug_commit
    assert tree_digest(history.path) == before
    assert git(history.path, "rev-parse", "HEAD") == head_before
    assert git(history.path, "stash", "list").count("user's stash") == 1
    assert git(history.path, "worktree", "list").count("\n") == 1  # only the user's own


def test_result_describes_the_first_bad_commit(tmp_path: Path) -> None:
    history = make_history(tmp_path / "repo", 40, 30)
    result = run(history.path, history.good, history.bad, "echo checking; test ! -f bug")
    info = result["first_bad_commit"]
    assert info["hash"] == history.bug_commit
    assert info["author"] == "Ada Dev <ada@example.com>"
    assert info["message"] == "commit 30 (adds the bug)"
    assert info["date"].startswith("2023-")
    paths = {f["path"]: f for f in info["diffstat"]["files"]}
    assert set(paths) == {"bug", "counter.txt"} and paths["bug"]["insertions"] == 1
    assert info["diffstat"]["files_changed"] == 2
    step = result["steps"][0]
    assert step["output_tail"].startswith("checking") and step["exit_code"] in (0, 1)
    assert result["runs"] == len(result["steps"])


def test_command_runs_in_the_subfolder_passed_as_repo(tmp_path: Path) -> None:
    extra = {i: {"pkg/flag.txt": "bad\n" if i >= 12 else "ok\n"} for i in range(20)}
    history = make_history(tmp_path / "repo", 20, 19, extra_files=extra)
    result = run(history.path / "pkg", history.good, history.bad, "grep -q ok flag.txt")
    assert result["first_bad_commit"]["hash"] == history.commits[12]


def test_unknown_ref_is_refused(tmp_path: Path) -> None:
    history = make_history(tmp_path / "repo", 5, 3)
    with pytest.raises(BisectError, match="not a commit") as err:
        prepare_commit_bisect(history.path, "v9.9", "main", "true")
    assert err.value.next_step


def test_ref_beginning_with_dash_is_refused(tmp_path: Path) -> None:
    history = make_history(tmp_path / "repo", 5, 3)
    with pytest.raises(BisectError, match="begins with '-'"):
        prepare_commit_bisect(history.path, "--all", "main", "true")


def test_good_that_is_not_an_ancestor_of_bad_is_refused(tmp_path: Path) -> None:
    history = make_history(tmp_path / "repo", 10, 5)
    with pytest.raises(BisectError, match="not an ancestor") as err:
        prepare_commit_bisect(history.path, history.bad, history.good, "true")
    assert "swap" in (err.value.next_step or "")


def test_not_a_repository_is_refused(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(BisectError, match="not inside a git repository"):
        prepare_commit_bisect(tmp_path / "plain", "a", "b", "true")


def test_command_not_found_is_refused_before_running(tmp_path: Path) -> None:
    history = make_history(tmp_path / "repo", 5, 3)
    with pytest.raises(BisectError, match="was not found on PATH"):
        prepare_commit_bisect(history.path, history.good, history.bad, "no-such-program-xyz --flag")


def test_script_missing_everywhere_stops_as_command_not_found(tmp_path: Path) -> None:
    history = make_history(tmp_path / "repo", 12, 6)
    before = tree_digest(history.path)
    with pytest.raises(BisectError, match="could not be run") as err:
        run(history.path, history.good, history.bad, "./missing-script.sh")
    assert "on the good commit too" in err.value.message
    assert tree_digest(history.path) == before


def test_untracked_reproducer_named_by_the_command_is_copied_into_each_candidate(tmp_path: Path) -> None:
    """The user's own check.sh is untracked (as in the agent benchmark): `git bisect run` in the
    checkout sees it at every commit, so every candidate worktree gets a copy; the checkout is left
    as it was, and a commit that tracks the same path keeps its own version."""
    history = make_history(tmp_path / "repo", 16, 9)
    (history.path / "check.sh").write_text("test ! -f bug\n")
    (history.path / "secret.txt").write_text("not named by the command\n")
    before = tree_digest(history.path)

    result = run(history.path, history.good, history.bad, "sh check.sh; echo $? > /dev/null; sh check.sh")

    assert result["first_bad_commit"]["hash"] == history.bug_commit
    assert result["carried_files"] == ["check.sh"]
    assert all(s["exit_code"] in (0, 1) for s in result["steps"]), result["steps"]
    assert tree_digest(history.path) == before
    assert git(history.path, "status", "--porcelain").split() == ["??", "check.sh", "??", "secret.txt"]

    # a tracked script is never replaced by the checkout's copy, and paths leaving the repo are ignored
    (tmp_path / "outside.sh").write_text("exit 0\n")
    plan = prepare_commit_bisect(history.path, history.good, history.bad, "sh counter.txt ../outside.sh")
    assert plan.carried == []


def test_good_and_bad_both_failing_is_reported(tmp_path: Path) -> None:
    history = make_history(tmp_path / "repo", 30, 10)
    with pytest.raises(BisectError, match="good and bad both fail") as err:
        run(history.path, history.good, history.bad, "exit 3")
    assert "older good commit" in (err.value.next_step or "")


def test_bad_that_passes_is_reported(tmp_path: Path) -> None:
    history = make_history(tmp_path / "repo", 30, 10)
    with pytest.raises(BisectError, match=r"bad commit .* passes"):
        run(history.path, history.good, history.bad, "true")


def test_hanging_test_counts_as_bad_when_chosen(tmp_path: Path) -> None:
    history = make_history(tmp_path / "repo", 8, 4)
    result = run(
        history.path,
        history.good,
        history.bad,
        "if [ -f bug ]; then sleep 30; fi",
        timeout_s=0.5,
        on_timeout="bad",
    )
    assert result["first_bad_commit"]["hash"] == history.bug_commit
    timed = [s for s in result["steps"] if s["timed_out"]]
    assert timed and all(s["verdict"] == "bad" and "timed out" in s["note"] for s in timed)


def test_hanging_test_is_skipped_when_chosen(tmp_path: Path) -> None:
    history = make_history(tmp_path / "repo", 7, 5)
    result = run(
        history.path,
        history.good,
        history.bad,
        "if [ -f bug ]; then sleep 30; fi",
        timeout_s=0.5,
        on_timeout="skip",
    )
    # Every commit with the bug hangs, so all of them are skipped: the answer is a set, honestly.
    assert result["first_bad_commit"] is None
    assert history.bug_commit in result["possible_first_bad"]
    assert all(s["verdict"] == "skip" for s in result["steps"] if s["timed_out"])


def test_exit_125_skips_like_git(tmp_path: Path) -> None:
    history = make_history(tmp_path / "repo", 40, 20)
    # Commit 20 (the bug) itself cannot be tested; 21 can.
    command = 'if [ "$(cat counter.txt)" = 20 ]; then exit 125; fi; test ! -f bug'
    result = run(history.path, history.good, history.bad, command)
    assert result["first_bad_commit"] is None
    assert set(result["possible_first_bad"]) == {history.commits[20], history.commits[21]}
    assert result["skipped"] == [history.commits[20]]


def test_signal_exit_stops_like_git(tmp_path: Path) -> None:
    history = make_history(tmp_path / "repo", 10, 5)
    with pytest.raises(BisectError, match="killed by signal 9"):
        run(history.path, history.good, history.bad, "kill -9 $$")
    with pytest.raises(BisectError, match=r"exit code 137 \(>= 128\)"):
        run(history.path, history.good, history.bad, "sh -c 'kill -9 $$'")


# ---------------------------------------------------------------------------- env='uv'


@pytest.fixture
def offline_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "never")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    wheels = tmp_path / "wheels"
    for minor in (5, 6):
        build_wheel(wheels, "tsdemo", f"1.{minor}", {"tsdemo/__init__.py": f"BUG = {minor >= 6}\n"})
    return wheels


def _lock_for(tmp_path: Path, wheels: Path, version: str) -> dict[str, str]:
    project = tmp_path / f"lock-{version}"
    project.mkdir()
    pyproject = (
        '[project]\nname = "app"\nversion = "0.1"\nrequires-python = ">=3.10"\n'
        f'dependencies = ["tsdemo=={version}"]\n\n[tool.uv]\npackage = false\n'
        f'find-links = ["{wheels}"]\nno-index = true\n'
    )
    (project / "pyproject.toml").write_text(pyproject)
    from trainsleuth.tools.bisect.common import which_uv

    subprocess.run(
        [which_uv(), "lock", "--python", default_python()], cwd=project, check=True, capture_output=True
    )
    return {"pyproject.toml": pyproject, "uv.lock": (project / "uv.lock").read_text()}


def test_uv_env_per_commit_is_built_from_its_own_lockfile(tmp_path: Path, offline_uv: Path) -> None:
    good_files = _lock_for(tmp_path, offline_uv, "1.5")
    bad_files = _lock_for(tmp_path, offline_uv, "1.6")
    extra: dict[int, dict[str, str]] = {0: good_files, 14: bad_files}
    extra[5] = {"uv.lock": "this is not a lockfile\n"}  # a broken commit: its env cannot be built
    extra[6] = {"uv.lock": good_files["uv.lock"]}
    history = make_history(tmp_path / "repo", 24, 23, extra_files=extra)
    before = tree_digest(history.path)
    cache = tmp_path / "envs"
    command = "python -c 'import sys, tsdemo; sys.exit(1 if tsdemo.BUG else 0)'"

    result = run(
        history.path,
        history.good,
        history.bad,
        command,
        env_mode="uv",
        python=default_python(),
        env_cache_dir=cache,
    )

    assert result["first_bad_commit"]["hash"] == history.commits[14]
    envs = [s["env"] for s in result["steps"] if "env" in s]
    assert envs and all(e["ok"] for e in envs if e["key"])
    keys = {e["key"] for e in envs}
    assert len(keys) <= 3  # one per distinct lockfile, shared by the commits that have it
    assert any(e["reused"] for e in envs)
    assert len(list((cache / "commits").glob("*/pyvenv.cfg"))) == len(keys)
    assert tree_digest(history.path) == before
    assert not (history.path / ".venv").exists()


def test_uv_env_that_cannot_be_built_is_skipped(tmp_path: Path, offline_uv: Path) -> None:
    good_files = _lock_for(tmp_path, offline_uv, "1.5")
    broken = {"uv.lock": "garbage = [\n"}
    extra = {0: good_files, **{i: broken for i in range(1, 6)}}
    history = make_history(tmp_path / "repo", 6, 5, extra_files=extra)
    result = run(
        history.path,
        history.good,
        history.bad,
        "python -c 'pass'",
        env_mode="uv",
        python=default_python(),
        env_cache_dir=tmp_path / "envs",
        verify_endpoints=False,
    )
    assert result["first_bad_commit"] is None
    assert result["steps"] and all(s["verdict"] == "skip" for s in result["steps"])
    assert all("environment could not be built" in s["note"] for s in result["steps"])


def test_uv_mode_needs_a_lockfile_at_bad(tmp_path: Path) -> None:
    history = make_history(tmp_path / "repo", 5, 3)
    with pytest.raises(BisectError, match=r"needs a uv\.lock"):
        prepare_commit_bisect(history.path, history.good, history.bad, "true", env_mode="uv")


def test_default_python_is_a_real_interpreter() -> None:
    assert Path(default_python()).exists()
    assert sys.version_info[:2] >= (3, 10)

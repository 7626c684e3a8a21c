"""Build an agent-benchmark case as a real git repository with its history.

    python -m benchmarks.agent.build CASE DEST      # e.g. tabular_shuffle /tmp/case

A case folder holds `history/NN-slug/` overlays applied in order, one commit each: every file in an
overlay is written over the tree (`.commit` holds the commit message; `.delete` lists paths to
remove). `check.sh` (the user's reproducer) is copied into the working tree untracked, as a user
would have it; `ISSUE.md` (the user's report) is not, it is what the assistant is told. The answer
(`ANSWER.md`) and the playbook stay in the case folder; cases in PLAYBOOKS_PENDING have no playbook yet.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

CASES = Path(__file__).resolve().parent / "cases"
SPECIAL = {".commit", ".delete"}


# Cases whose playbook.yaml is not written yet, listed by name so that a missing playbook is never
# silent. Empty since issue 26 (every case has its playbook, whose submit_diagnosis and verify_fix prove
# that check.sh fails as built and passes with fix.patch); tests/test_agent_cases.py asserts that every
# case has a playbook, so a case added here must bring back a test that runs its check.sh itself.
PLAYBOOKS_PENDING: frozenset[str] = frozenset()


def case_names() -> list[str]:
    return sorted(p.name for p in CASES.iterdir() if (p / "history").is_dir())


def playbook_cases() -> list[str]:
    """The cases that have a playbook (every case not in PLAYBOOKS_PENDING)."""
    return [name for name in case_names() if name not in PLAYBOOKS_PENDING]


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env)


def build_case(name: str, dest: Path) -> Path:
    """Create `dest` as a git repository holding case `name`'s history; returns `dest`."""
    case = CASES / name
    if not (case / "history").is_dir():
        raise SystemExit(f"no case {name!r}; cases: {', '.join(case_names())}")
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise SystemExit(f"{dest} exists and is not empty")
    dest.mkdir(parents=True, exist_ok=True)
    _git(dest, "init", "-q", "-b", "main")
    _git(dest, "config", "user.name", "Dana Researcher")
    _git(dest, "config", "user.email", "dana@example.org")
    _git(dest, "config", "commit.gpgsign", "false")
    for i, overlay in enumerate(sorted(p for p in (case / "history").iterdir() if p.is_dir())):
        for path in (overlay / ".delete").read_text().split() if (overlay / ".delete").exists() else []:
            target = dest / path
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
        for src in overlay.rglob("*"):
            if src.is_file() and src.name not in SPECIAL:
                out = dest / src.relative_to(overlay)
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, out)
        message = (overlay / ".commit").read_text().strip()
        stamp = f"2026-10-{1 + 2 * i:02d}T10:00:00+00:00"
        env = {**os.environ, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        _git(dest, "add", "-A")
        _git(dest, "commit", "-q", "-m", message, env=env)
    check = case / "check.sh"
    shutil.copy2(check, dest / "check.sh")
    (dest / "check.sh").chmod(0o755)
    return dest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("case", help=f"one of: {', '.join(case_names())}")
    p.add_argument("dest", type=Path)
    args = p.parse_args(argv)
    print(build_case(args.case, args.dest))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Find the first bad version of a dependency: one cached uv environment per candidate version.

`versions` is ordered oldest first. Nothing is assumed about the ends: the search keeps the
invariant "everything before `lo` is good, everything from `hi` is bad" starting from the
virtual bounds (-1, len), so it also reports "no version fails" and "even the first version
fails" honestly. A version whose environment cannot be built (for example it does not
install), or whose test exits 125 or times out with on_timeout='skip', is skipped and reported;
the search then tries the untested version nearest to the middle, as git does with skips.

Environments live under `cache_dir` keyed by Python, package, version, base requirements and
index options, so a second bisect over the same versions reuses them and only runs the test.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainsleuth.tools.bisect.common import (
    BisectError,
    OnTimeout,
    Reporter,
    RunOutcome,
    check_command,
    check_option_like,
    run_test,
    venv_environment,
    which_uv,
)
from trainsleuth.tools.bisect.uvenv import IndexOptions, Reuse, inspect_reuse, resolve_python, version_env
from trainsleuth.tools.job_records import JobCancelled

_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_VERSION = re.compile(r"^[A-Za-z0-9!+._-]+$")


@dataclass
class VersionBisectPlan:
    package: str
    versions: list[str]
    command: str
    python: str  # resolved interpreter path
    cwd: Path
    cache_dir: Path
    requirements: list[str] = field(default_factory=list)
    index: IndexOptions = field(default_factory=IndexOptions)
    timeout_s: float | None = 600.0
    on_timeout: OnTimeout = "skip"
    env_timeout_s: float = 1800.0
    extra_env: dict[str, str] = field(default_factory=dict)
    reuse: Reuse = field(default_factory=Reuse)

    def params(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "versions": self.versions,
            "command": self.command,
            "python": self.python,
            "requirements": self.requirements,
            "reuse_packages": list(self.reuse.packages),
        }


def prepare_version_bisect(
    package: str,
    versions: Sequence[str],
    command: str,
    *,
    cwd: Path,
    cache_dir: Path,
    python: str | None = None,
    requirements: Sequence[str] = (),
    find_links: Sequence[str] = (),
    index_url: str | None = None,
    extra_index_urls: Sequence[str] = (),
    no_index: bool = False,
    timeout_s: float | None = 600.0,
    on_timeout: OnTimeout = "skip",
    extra_env: Mapping[str, str] | None = None,
    reuse_packages: Sequence[str] = (),
) -> VersionBisectPlan:
    """Validate the request (names, versions, options, the interpreter); raise BisectError if wrong."""
    if not _NAME.match(package or ""):
        raise BisectError(
            f"{package!r} is not a valid package name", "pass the distribution name, e.g. 'torch' or 'numpy'"
        )
    versions = [v.strip() for v in versions]
    if len(versions) < 2:
        raise BisectError("at least two versions are needed to bisect", "pass the versions oldest first")
    for v in versions:
        if not v or not _VERSION.match(v) or v.startswith("-"):
            raise BisectError(f"{v!r} is not a valid version", "pass plain versions such as '2.1.0'")
    if len(set(versions)) != len(versions):
        raise BisectError("the versions list has duplicates", "pass each version once, oldest first")
    for req in requirements:
        check_option_like(req, "requirement")
    for name in reuse_packages:
        if not _NAME.match(name or ""):
            raise BisectError(f"reuse_packages: {name!r} is not a package name", "pass names such as 'torch'")
        if name.lower() == package.lower():
            raise BisectError(
                f"reuse_packages cannot include {package!r}, the package being bisected",
                "leave it out: each environment installs its own version of it",
            )
    for link in find_links:
        check_option_like(link, "find_links entry")
    for url in [index_url or "", *extra_index_urls]:
        if url:
            check_option_like(url, "index URL")
    if on_timeout not in ("skip", "bad"):
        raise BisectError(f"on_timeout must be 'skip' or 'bad', not {on_timeout!r}")
    base_env = {**os.environ, **(extra_env or {})}
    if not command.strip():
        check_command(command)
    uv = which_uv()
    import threading

    interp = resolve_python(uv, python, base_env, threading.Event())
    reuse = inspect_reuse(python or interp, reuse_packages, base_env, threading.Event())
    return VersionBisectPlan(
        package=package,
        versions=list(versions),
        command=command,
        python=interp,
        cwd=Path(cwd),
        cache_dir=Path(cache_dir),
        requirements=list(requirements),
        index=IndexOptions(tuple(find_links), index_url, tuple(extra_index_urls), no_index),
        timeout_s=timeout_s,
        on_timeout=on_timeout,
        extra_env=dict(extra_env or {}),
        reuse=reuse,
    )


def run_version_bisect(plan: VersionBisectPlan, reporter: Reporter) -> dict[str, Any]:
    """Binary search for the first version on which the command fails."""
    uv = which_uv()
    base_env = {**os.environ, **plan.extra_env}
    n = len(plan.versions)
    lo, hi = -1, n  # versions[<=lo] good, versions[>=hi] bad (virtual bounds)
    skipped: set[int] = set()
    install_failures: list[dict[str, Any]] = []
    tried: list[dict[str, Any]] = []
    envs: dict[str, Path] = {}  # version -> its environment (for the trace_diff offer)

    def pick() -> int | None:
        inside = [i for i in range(lo + 1, hi) if i not in skipped]
        if not inside:
            return None
        mid = (lo + hi) // 2
        return min(inside, key=lambda i: (abs(i - mid), i))

    while True:
        if reporter.cancel_event.is_set():
            raise JobCancelled("cancelled")
        idx = pick()
        if idx is None:
            break
        version = plan.versions[idx]
        step = len(tried) + 1
        total = len(tried) + max(1, math.ceil(math.log2(hi - lo)))
        reporter.progress(
            len(tried), total, f"step {step} of about {total}: {plan.package}=={version}", version
        )
        started = time.monotonic()
        built = version_env(
            uv=uv,
            package=plan.package,
            version=version,
            python=plan.python,
            requirements=plan.requirements,
            index=plan.index,
            cache_dir=plan.cache_dir,
            base_env=base_env,
            timeout_s=plan.env_timeout_s,
            cancel_event=reporter.cancel_event,
            reuse=plan.reuse,
        )
        env_info = {"reused": built.reused, "ok": built.ok, "build_s": round(time.monotonic() - started, 3)}
        if built.path is not None:
            envs[version] = built.path
        if not built.ok or built.path is None:
            outcome = RunOutcome("skip", None, False, 0.0, built.log_tail, "could not be installed: skipped")
            install_failures.append({"version": version, "log_tail": built.log_tail})
        else:
            outcome = run_test(
                plan.command,
                cwd=plan.cwd,
                env=venv_environment(base_env, built.path),
                timeout_s=plan.timeout_s,
                on_timeout=plan.on_timeout,
                cancel_event=reporter.cancel_event,
            )
        tried.append({"index": step, "version": version, **outcome.to_dict(), "env": env_info})
        if outcome.verdict == "good":
            lo = idx
        elif outcome.verdict == "bad":
            hi = idx
        else:
            skipped.add(idx)
    runs = sum(1 for t in tried if t["exit_code"] is not None or t["timed_out"])
    if runs == 0 and install_failures and len(install_failures) == len(tried):
        # Nothing was tested: that is not a bisect result, and must not read like one.
        last = (install_failures[-1]["log_tail"] or "").strip().splitlines()
        why = last[-1] if last else "no installer output"
        raise BisectError(
            f"no version of {plan.package} could be installed ({', '.join(f['version'] for f in install_failures)}), "
            f"so nothing was tested; the installer said: {why}",
            "check the package name and the versions (they must exist on the index), and the index options: "
            "no_index needs find_links with the wheels, a private index needs index_url",
        )
    first_bad: str | None = None
    possible: list[str] = []
    between = [plan.versions[i] for i in range(lo + 1, hi) if i in skipped]
    if between:
        possible = [*between, *([plan.versions[hi]] if hi < n else [])]
        conclusion = (
            f"only skipped versions are left: the first bad version is one of {', '.join(possible)}"
            + ("" if hi < n else " (or none fails)")
        )
    elif hi == n:
        conclusion = (
            f"no version fails: the command passed with every tested version up to {plan.versions[-1]}"
        )
    elif hi == 0:
        first_bad = plan.versions[0]
        conclusion = (
            f"even the first version {plan.versions[0]} fails: the problem is not introduced by "
            f"{plan.package} within this range (or it predates it)"
        )
    else:
        first_bad = plan.versions[hi]
        conclusion = (
            f"first bad version: {plan.package}=={first_bad} (last good: {plan.versions[lo]}), "
            f"{runs} test runs over {n} versions"
        )
    reporter.progress(len(tried), len(tried), "done", first_bad)
    last_good = plan.versions[lo] if lo >= 0 else None
    offer = None
    if first_bad and last_good and first_bad in envs and last_good in envs:
        from trainsleuth.tools.trace.offer import env_python, version_offer

        offer = version_offer(
            plan.package, last_good, first_bad, env_python(envs[last_good]), env_python(envs[first_bad]),
            plan.command, plan.cwd,
        )  # fmt: skip
    return {
        **({"trace_diff": offer} if offer else {}),
        "package": plan.package,
        "versions": plan.versions,
        "command": plan.command,
        "python": plan.python,
        "reused_packages": [f"{n}=={v}" for n, v in plan.reuse.versions],
        "first_bad_version": first_bad,
        "last_good_version": plan.versions[lo] if lo >= 0 else None,
        "all_fail": hi == 0 and not between,
        "none_fail": hi == n and not between,
        "possible_first_bad": possible,
        "versions_tried": [t["version"] for t in tried],
        "install_failures": install_failures,
        "runs": runs,
        "steps": tried,
        "conclusion": conclusion,
    }

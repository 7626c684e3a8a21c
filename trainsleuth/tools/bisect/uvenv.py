"""uv environments for bisects, cached on disk so a later candidate or a later bisect reuses them.

- per commit: `uv sync --frozen` from the commit's own `uv.lock` into an environment keyed by
  the lockfile's hash (and the Python request), so commits that share a lockfile share it;
- per version: `uv venv` + `uv pip install package==version` keyed by Python, package, version,
  base requirements and index options.

An environment is marked complete only after it was built successfully; a half-built one is
rebuilt. Builders of the same environment are serialised with a file lock.

Heavy packages already installed (torch) can be reused instead of installed again
(`Reuse`): they are excluded from uv's resolution (`--excludes`), and a `.pth` file appends the
base interpreter's site-packages to the candidate environment's path, after its own, so the
bisected package and everything uv installed still win over the base environment's copies.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainsleuth.process import run_process, tail_text
from trainsleuth.tools.job_records import JobCancelled

COMPLETE_MARKER = ".trainsleuth-complete"
ENV_TAIL_CHARS = 1500


@dataclass
class EnvResult:
    path: Path | None
    reused: bool
    ok: bool
    log_tail: str = ""
    key: str = ""


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        try:
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - not on POSIX
            pass
        yield


def default_python() -> str:
    """The base interpreter of the running Python (never makes uv download one)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return str(base)


def _digest(parts: Mapping[str, object]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _uv_run(
    uv: str,
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    cancel_event: threading.Event,
) -> tuple[bool, str]:
    result = run_process([uv, *args], cwd=cwd, env=env, timeout_s=timeout_s, cancel_event=cancel_event)
    if result.cancelled or cancel_event.is_set():
        raise JobCancelled("cancelled while building an environment")
    tail = tail_text(result.output_tail(), ENV_TAIL_CHARS)
    if result.timed_out:
        return False, f"uv {args[0]} timed out after {timeout_s:g} s\n{tail}"
    return result.returncode == 0, tail


def sync_commit_env(
    *,
    uv: str,
    project_dir: Path,
    cache_dir: Path,
    python: str | None,
    base_env: Mapping[str, str],
    timeout_s: float,
    cancel_event: threading.Event,
) -> EnvResult:
    """`uv sync --frozen` the project at `project_dir` into the environment of its lockfile."""
    lock = project_dir / "uv.lock"
    if not lock.is_file():
        return EnvResult(None, False, False, "this commit has no uv.lock, so its environment cannot be built")
    key = _digest({"lock": hashlib.sha256(lock.read_bytes()).hexdigest(), "python": python or ""})[:24]
    env_dir = cache_dir / "commits" / key
    with _locked(cache_dir / "commits" / f"{key}.lock"):
        reused = (env_dir / COMPLETE_MARKER).exists()
        if not reused and env_dir.exists():
            shutil.rmtree(env_dir, ignore_errors=True)
        env = dict(base_env)
        env["UV_PROJECT_ENVIRONMENT"] = str(env_dir)
        env.pop("VIRTUAL_ENV", None)
        args = ["sync", "--frozen", "--no-progress"]
        if python:
            args += ["--python", python]
        ok, tail = _uv_run(uv, args, cwd=project_dir, env=env, timeout_s=timeout_s, cancel_event=cancel_event)
        if ok:
            (env_dir / COMPLETE_MARKER).write_text("ok\n", encoding="utf-8")
        return EnvResult(env_dir if ok else None, reused, ok, tail, key)


@dataclass(frozen=True)
class IndexOptions:
    find_links: tuple[str, ...] = ()
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    no_index: bool = False

    def args(self) -> list[str]:
        out: list[str] = []
        for link in self.find_links:
            out += ["--find-links", link]
        if self.index_url:
            out += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            out += ["--extra-index-url", url]
        if self.no_index:
            out.append("--no-index")
        return out


@dataclass(frozen=True)
class Reuse:
    """Packages taken from the base interpreter's environment instead of being installed."""

    packages: tuple[str, ...] = ()
    site_dirs: tuple[str, ...] = ()
    versions: tuple[tuple[str, str], ...] = ()

    def key(self) -> dict[str, object]:
        return {"packages": list(self.packages), "site_dirs": list(self.site_dirs), "versions": self.versions}


_REUSE_PROBE = """
import importlib.metadata as md, json, sys, sysconfig
names = json.loads(sys.argv[1])
found = {}
for n in names:
    try:
        found[n] = md.version(n)
    except md.PackageNotFoundError:
        pass
paths = sysconfig.get_paths()
print(json.dumps({"versions": found, "site_dirs": sorted({paths["purelib"], paths["platlib"]})}))
"""


def inspect_reuse(
    python: str, packages: Sequence[str], env: Mapping[str, str], cancel_event: threading.Event
) -> Reuse:
    """Check that `python`'s environment has `packages` and find its site-packages folders."""
    if not packages:
        return Reuse()
    from trainsleuth.tools.bisect.common import BisectError

    names = sorted({p.strip().lower() for p in packages})
    result = run_process(
        [python, "-c", _REUSE_PROBE, json.dumps(names)],
        env=env,
        timeout_s=120,
        cancel_event=cancel_event,
        cwd=Path.cwd(),
    )
    if result.returncode != 0:
        raise BisectError(
            f"could not inspect {python}'s environment: {tail_text(result.output_tail(), 500)}",
            "pass python as an interpreter that has the packages to reuse",
        )
    data = json.loads(result.stdout_tail.strip().splitlines()[-1])
    missing = [n for n in names if n not in data["versions"]]
    if missing:
        raise BisectError(
            f"reuse_packages: {', '.join(missing)} is not installed in {python}'s environment, so it cannot be reused",
            "pass python as the interpreter whose environment has it (e.g. the project's .venv/bin/python), "
            "or leave it out of reuse_packages to install it in each environment",
        )
    return Reuse(
        packages=tuple(names),
        site_dirs=tuple(data["site_dirs"]),
        versions=tuple(sorted(data["versions"].items())),
    )


def _site_packages(env_dir: Path) -> Path | None:
    found = sorted(env_dir.glob("lib/python*/site-packages")) or sorted(env_dir.glob("Lib/site-packages"))
    return found[0] if found else None


_python_cache: dict[str, str] = {}


def resolve_python(uv: str, python: str | None, env: Mapping[str, str], cancel_event: threading.Event) -> str:
    """The interpreter uv will use for `python` (a path or a version request), as an absolute path."""
    request = python or default_python()
    if request in _python_cache:
        return _python_cache[request]
    result = run_process(
        [uv, "python", "find", request], env=env, timeout_s=120, cancel_event=cancel_event, cwd=Path.cwd()
    )
    if result.returncode == 0 and result.stdout_tail.strip():
        found = result.stdout_tail.strip().splitlines()[-1]
        _python_cache[request] = found
        return found
    from trainsleuth.tools.bisect.common import BisectError

    raise BisectError(
        f"uv found no Python interpreter for {request!r}: {tail_text(result.output_tail(), 500)}",
        "pass python as the path of an installed interpreter (e.g. the project's .venv/bin/python)",
    )


def version_env(
    *,
    uv: str,
    package: str,
    version: str,
    python: str,
    requirements: Sequence[str],
    index: IndexOptions,
    cache_dir: Path,
    base_env: Mapping[str, str],
    timeout_s: float,
    cancel_event: threading.Event,
    reuse: Reuse | None = None,
) -> EnvResult:
    """A virtual environment with `package==version` and the base requirements (cached)."""
    reuse = reuse or Reuse()
    key = _digest(
        {
            "python": python,
            "package": package.lower(),
            "version": version,
            "requirements": sorted(requirements),
            "index": index.args(),
            **({"reuse": reuse.key()} if reuse.packages else {}),
        }
    )[:24]
    env_dir = cache_dir / "versions" / key
    with _locked(cache_dir / "versions" / f"{key}.lock"):
        if (env_dir / COMPLETE_MARKER).exists():
            return EnvResult(env_dir, True, True, "", key)
        if env_dir.exists():
            shutil.rmtree(env_dir, ignore_errors=True)
        env = dict(base_env)
        env.pop("VIRTUAL_ENV", None)
        ok, tail = _uv_run(
            uv,
            ["venv", "--quiet", "--no-project", "--python", python, str(env_dir)],
            cwd=cache_dir,
            env=env,
            timeout_s=timeout_s,
            cancel_event=cancel_event,
        )
        exclude: list[str] = []
        if ok and reuse.packages:
            site = _site_packages(env_dir)
            if site is None:
                return EnvResult(None, False, False, f"no site-packages folder in {env_dir}", key)
            # After the environment's own site-packages: what uv installs here wins.
            (site / "_trainsleuth_reuse.pth").write_text("\n".join(reuse.site_dirs) + "\n", encoding="utf-8")
            excludes = env_dir / ".trainsleuth-excludes.txt"
            excludes.write_text("\n".join(reuse.packages) + "\n", encoding="utf-8")
            exclude = ["--excludes", str(excludes)]
        if ok:
            interp = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
            ok, tail = _uv_run(
                uv,
                [
                    "pip",
                    "install",
                    "--no-progress",
                    "--python",
                    str(interp),
                    *index.args(),
                    *exclude,
                    f"{package}=={version}",
                    *requirements,
                ],
                cwd=cache_dir,
                env=env,
                timeout_s=timeout_s,
                cancel_event=cancel_event,
            )
        if not ok:
            shutil.rmtree(env_dir, ignore_errors=True)
            return EnvResult(None, False, False, tail, key)
        (env_dir / COMPLETE_MARKER).write_text("ok\n", encoding="utf-8")
        return EnvResult(env_dir, False, True, tail, key)

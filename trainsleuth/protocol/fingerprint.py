"""What a reproducer can reach, fingerprinted, so a "fix" that changes the test instead is caught.

A fingerprint has three parts:
- `tree`: a git tree of every file in the workspace that git does not ignore (tracked and untracked),
  written with a temporary index (`snapshot.write_tree`): the reproducer's tests, data and code;
- `extras["config:PATH"]`: every test-configuration file in the workspace, ignored ones included
  (conftest.py, pytest.ini, pyproject.toml, setup.cfg, tox.ini, sitecustomize.py, *.pth), by content;
- `extras["env:DIR/ENTRY"]`: the interpreters' environments: each top-level entry of every
  site-packages folder the reproducer's Python would import from (a git-ignored `.venv` too). Files at
  the top level (`.pth`, `sitecustomize.py`, single-module packages) by content; package folders by the
  size, modification and change times of every file inside (the change time cannot be set back).

`changes(before, after)` names exactly what differs. Files that a reproducer run writes itself and that
are only logs or plots (`is_run_output`) are set aside, so running the reproducer is never a "change".
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainsleuth.protocol.snapshot import SnapshotError, object_exists, tree_changes, write_tree

CONFIG_NAMES = frozenset(
    {
        "conftest.py",
        "pytest.ini",
        "pyproject.toml",
        "setup.cfg",
        "tox.ini",
        ".pytest.ini",
        "sitecustomize.py",
        "usercustomize.py",
        "noxfile.py",
    }
)
_SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".trainsleuth", "site-packages", "dist-packages"}
)
WALK_LIMIT = 200_000
# What a training or test run writes on its own: logs, plots, caches. Data files (csv, npy, pt, json)
# are not here: a test may compare against them.
_OUTPUT_SUFFIXES = frozenset(
    {".log", ".out", ".err", ".pyc", ".png", ".jpg", ".jpeg", ".svg", ".prof", ".trace"}
)
_OUTPUT_DIRS = frozenset(
    {
        "runs",
        "outputs",
        "wandb",
        "mlruns",
        "lightning_logs",
        "logs",
        "__pycache__",
        ".pytest_cache",
        "checkpoints",
    }
)
_INFO_CODE = (
    "import json, site, sys, os\n"
    "sites = list(site.getsitepackages())\n"
    "user = site.getusersitepackages() if site.ENABLE_USER_SITE is not False else None\n"
    "print(json.dumps({'sites': sites, 'user': user, 'prefix': sys.prefix}))\n"
)


@dataclass
class Fingerprint:
    repo_root: str
    prefix: str
    tree: str
    extras: dict[str, str] = field(default_factory=dict)
    interpreters: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo_root": self.repo_root,
            "prefix": self.prefix,
            "tree": self.tree,
            "extras": self.extras,
            "interpreters": self.interpreters,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fingerprint:
        return cls(
            repo_root=str(data["repo_root"]),
            prefix=str(data.get("prefix") or ""),
            tree=str(data["tree"]),
            extras={str(k): str(v) for k, v in (data.get("extras") or {}).items()},
            interpreters=[str(p) for p in data.get("interpreters") or []],
        )


class FingerprintError(Exception):
    """The workspace cannot be fingerprinted (not a git repository, git failed)."""


def is_run_output(path: str) -> bool:
    """Logs, plots and caches a run writes by itself (never code, configuration or data)."""
    parts = path.split("/")
    return Path(path).suffix.lower() in _OUTPUT_SUFFIXES or any(p in _OUTPUT_DIRS for p in parts[:-1])


# ---------------------------------------------------------------------------- interpreters


def interpreters_for(command: str, workspace: Path, default: Path | None) -> list[Path]:
    """The Pythons a shell command will run: the project's default, and any interpreter (or script with
    a Python shebang, such as a `pytest` launcher) the command names."""
    found: list[Path] = []
    if default is not None:
        found.append(Path(default))
    try:
        words = shlex.split(command, posix=True)
    except ValueError:
        words = command.split()
    for word in words:
        if "=" in word and not word.startswith(("/", ".")):
            continue
        name = os.path.basename(word)
        if not name or name.startswith("-"):
            continue
        candidate = _which(word, workspace)
        if candidate is None:
            continue
        if re.match(r"^python[0-9.]*(\.exe)?$", name):
            found.append(candidate)
        else:
            shebang = _shebang_python(candidate, workspace)
            if shebang is not None:
                found.append(shebang)
    out: list[Path] = []
    for p in found:
        if p not in out:
            out.append(p)
    return out


def _which(word: str, workspace: Path) -> Path | None:
    if "/" in word:
        path = Path(word) if os.path.isabs(word) else workspace / word
        return path if path.is_file() else None
    hit = shutil.which(word)
    return Path(hit) if hit else None


def _shebang_python(path: Path, workspace: Path) -> Path | None:
    try:
        with path.open("rb") as fh:
            first = fh.readline(300)
    except OSError:
        return None
    if not first.startswith(b"#!") or b"python" not in first:
        return None
    parts = first[2:].decode("utf-8", "replace").split()
    if not parts:
        return None
    if os.path.basename(parts[0]) == "env" and len(parts) > 1:
        return _which(parts[1], workspace)
    return Path(parts[0]) if Path(parts[0]).is_file() else None


_INFO_CACHE: dict[tuple[str, float], dict[str, Any]] = {}


def _venv_sites(python: Path) -> list[Path] | None:
    """A virtual environment's site-packages, read from its layout and pyvenv.cfg (no code runs: a .pth
    file there may be exactly what is under suspicion); None when `python` is not in a venv."""
    prefix = python.parent.parent
    cfg = prefix / "pyvenv.cfg"
    if not cfg.is_file():
        return None
    sites = sorted(prefix.glob("lib/python*/site-packages")) + sorted(prefix.glob("Lib/site-packages"))
    settings: dict[str, str] = {}
    try:
        for line in cfg.read_text(encoding="utf-8", errors="replace").splitlines():
            key, sep, value = line.partition("=")
            if sep:
                settings[key.strip().lower()] = value.strip()
    except OSError:
        pass
    if settings.get("include-system-site-packages", "").lower() == "true" and settings.get("home"):
        home = Path(settings["home"])
        base = next((home / n for n in ("python3", "python", "python.exe") if (home / n).exists()), None)
        if base is not None:
            sites += _queried_sites(base)
    return sites


def _queried_sites(python: Path) -> list[Path]:
    """A non-venv interpreter's site folders, asked with -S (its own .pth files never run)."""
    try:
        stamp = python.stat().st_mtime
    except OSError:
        return []
    key = (str(python), stamp)
    info = _INFO_CACHE.get(key)
    if info is None:
        try:
            proc = subprocess.run(
                [str(python), "-S", "-c", _INFO_CODE],
                capture_output=True,
                text=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
            )
            info = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else {}
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
            info = {}
        _INFO_CACHE[key] = info
    sites = [Path(p) for p in info.get("sites") or []]
    if info.get("user"):
        sites.append(Path(info["user"]))
    return sites


def interpreter_sites(python: Path) -> list[Path]:
    """The site-packages folders `python` imports from."""
    sites = _venv_sites(python)
    if sites is None:
        sites = _queried_sites(python)
    return [p for p in sites if p.is_dir()]


# ---------------------------------------------------------------------------- digests


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    try:
        if path.is_symlink():
            h.update(b"link:" + os.readlink(path).encode("utf-8", "surrogateescape"))
        else:
            with path.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    except OSError as exc:
        h.update(f"unreadable:{exc.errno}".encode())
    return h.hexdigest()[:32]


def _tree_stat_digest(folder: Path) -> str:
    """Every file under `folder`: name, size, modification and change time (no contents: fast)."""
    parts: list[str] = []
    stack = [(str(folder), "")]
    while stack:
        path, rel = stack.pop()
        try:
            entries = os.scandir(path)
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if is_dir:
                    stack.append((entry.path, f"{rel}{entry.name}/"))
                else:
                    parts.append(f"{rel}{entry.name}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}")
    parts.sort()
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:32]


def environment_digests(interpreters: list[Path]) -> dict[str, str]:
    out: dict[str, str] = {}
    for python in interpreters:
        for site_dir in interpreter_sites(python):
            try:
                entries = sorted(os.scandir(site_dir), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                path = Path(entry.path)
                key = f"env:{path}"
                if key in out:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    out[key] = _tree_stat_digest(path)
                else:
                    out[key] = _file_digest(path)
        cfg = python.parent.parent / "pyvenv.cfg"
        if cfg.is_file():
            out[f"env:{cfg}"] = _file_digest(cfg)
    return out


def config_digests(workspace: Path) -> dict[str, str]:
    """Test configuration anywhere in the workspace, git-ignored files included."""
    out: dict[str, str] = {}
    seen = 0
    for root, dirs, files in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        seen += len(files) + len(dirs)
        for name in files:
            if name in CONFIG_NAMES or name.endswith(".pth"):
                full = Path(root) / name
                out[f"config:{full.relative_to(workspace).as_posix()}"] = _file_digest(full)
        if seen > WALK_LIMIT:
            out["config:(walk stopped)"] = f"after {WALK_LIMIT} entries"
            break
    return out


def take(
    workspace: Path, state_dir: Path, interpreters: list[Path], *, environment: bool = True
) -> Fingerprint:
    """Fingerprint the workspace (and, with `environment`, its interpreters' environments)."""
    try:
        wt = write_tree(workspace, state_dir)
    except SnapshotError as exc:
        raise FingerprintError(str(exc)) from exc
    extras: dict[str, str] = {}
    for name in wt.skipped_large:
        try:
            st = (wt.root / name).stat()
            extras[f"large:{name}"] = f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
        except OSError:
            extras[f"large:{name}"] = "missing"
    if environment:
        extras.update(config_digests(workspace.resolve()))
        extras.update(environment_digests(interpreters))
    return Fingerprint(
        repo_root=str(wt.root),
        prefix=wt.prefix,
        tree=wt.tree,
        extras=extras,
        interpreters=[str(p) for p in interpreters] if environment else [],
    )


@dataclass
class Change:
    path: str  # repository-relative for files; absolute for the environment
    kind: str  # "file", "config", "environment", "large file"

    def describe(self) -> str:
        if self.kind == "environment":
            p = Path(self.path)
            inside = " (a file inside it)" if not p.suffix else ""
            return f"{self.path}{inside} in the interpreter's environment"
        return self.path


def changes(before: Fingerprint, after: Fingerprint, *, environment: bool = True) -> list[Change]:
    """What differs between two fingerprints (files by path, environment entries by folder or file)."""
    root = Path(after.repo_root)
    if not object_exists(root, before.tree):
        raise FingerprintError(
            f"the recorded tree {before.tree[:12]} is no longer in the repository (git gc removed it, or the "
            "repository was replaced)"
        )
    out = [Change(p, "file") for p in tree_changes(root, before.tree, after.tree, before.prefix)]
    seen = {c.path for c in out}
    if environment:
        keys = set(before.extras) | set(after.extras)
        for key in sorted(keys):
            if before.extras.get(key) == after.extras.get(key):
                continue
            kind, _, name = key.partition(":")
            if kind == "config":
                rel = f"{before.prefix}{name}"
                if rel not in seen:
                    out.append(Change(rel, "config"))
                    seen.add(rel)
            elif kind == "large":
                out.append(Change(name, "large file"))
            else:
                out.append(Change(name, "environment"))
    return out


__all__ = [
    "Change",
    "Fingerprint",
    "FingerprintError",
    "changes",
    "interpreters_for",
    "is_run_output",
    "take",
]

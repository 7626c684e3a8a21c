"""`environment_report`: what a target interpreter has installed and sees, and how two differ.

The facts are collected by `runners/env_runner.py` inside each interpreter (package versions from
importlib.metadata without importing the libraries; torch only for CUDA/cuDNN/NCCL versions).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from trainsleuth.tools.distributed.errors import AnalysisError, from_runner_error
from trainsleuth.tools.runners.launch import RunnerError, run_runner

TORCH_FIELDS = ("version", "cuda", "cudnn", "nccl", "hip", "cuda_available", "device_count", "devices")


class Environment(BaseModel):
    interpreter: str
    python: dict[str, Any]
    platform: dict[str, Any]
    torch: dict[str, Any] | None = Field(default=None, description="None when torch is not installed")
    driver: dict[str, Any] | None = None
    key_packages: dict[str, str | None] = Field(
        description="the usual training libraries; None = not installed"
    )
    installed: dict[str, str] = Field(description="every installed distribution (normalised name -> version)")
    env: dict[str, str] = Field(description="CUDA_*, NCCL_*, TORCH_*, ... as the interpreter sees them")

    def summary_lines(self) -> list[str]:
        t = self.torch
        if t is None:
            torch_line = "torch: not installed"
        elif not t.get("importable", True):
            torch_line = f"torch: installed but not importable ({t.get('import_error')})"
        elif t.get("skipped"):
            torch_line = f"torch: {self.installed.get('torch')} (not imported)"
        else:
            torch_line = (
                f"torch {t.get('version')}, CUDA {t.get('cuda')}, cuDNN {t.get('cudnn')}, NCCL {t.get('nccl')}, "
                f"GPUs {t.get('device_count', 0)}"
            )
        pkgs = ", ".join(f"{k} {v}" for k, v in self.key_packages.items() if v)
        lines = [
            f"{self.interpreter}: Python {self.python.get('version')} ({self.platform.get('system')} "
            f"{self.platform.get('machine')}), {len(self.installed)} distributions",
            f"  {torch_line}",
            f"  training libraries: {pkgs or 'none of the usual ones'}",
        ]
        if self.driver and self.driver.get("driver_version"):
            lines.append(f"  NVIDIA driver {self.driver['driver_version']}")
        if self.env:
            lines.append("  env: " + ", ".join(f"{k}={v}" for k, v in list(self.env.items())[:20]))
        return lines


class Difference(BaseModel):
    item: str = Field(description="python, torch.cuda, package:<name>, env:<VAR>, ...")
    a: Any = None
    b: Any = None
    key: bool = Field(
        default=False, description="a core training component (python, torch stack, key library)"
    )


class EnvironmentReport(BaseModel):
    environments: list[Environment]
    differences: list[Difference] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def render_text(self) -> str:
        lines: list[str] = []
        for env in self.environments:
            lines.extend(env.summary_lines())
        if len(self.environments) == 2:
            key = [d for d in self.differences if d.key]
            other = [d for d in self.differences if not d.key]
            lines.append(
                f"differences: {len(self.differences)} ({len(key)} in the core training stack); a = "
                f"{self.environments[0].interpreter}, b = {self.environments[1].interpreter}"
            )
            changed = [d for d in other if d.a is not None and d.b is not None]
            only_a = [d.item.removeprefix("package:") for d in other if d.b is None]
            only_b = [d.item.removeprefix("package:") for d in other if d.a is None]
            for d in key + changed[:40]:
                lines.append(f"  {d.item}: {d.a} -> {d.b}")
            if len(changed) > 40:
                lines.append(f"  ... {len(changed) - 40} more version changes (structured output has all)")
            for label, names in (("only in a", only_a), ("only in b", only_b)):
                if names:
                    more = f", ... {len(names) - 30} more" if len(names) > 30 else ""
                    lines.append(f"  {label} ({len(names)}): {', '.join(names[:30])}{more}")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


def _collect(
    python: Path, cwd: Path, import_torch: bool, timeout_s: float, cancel: threading.Event | None
) -> Environment:
    args = [] if import_torch else ["--no-torch"]
    try:
        outcome = run_runner(
            "env_runner.py", args, python=python, cwd=cwd, timeout_s=timeout_s, cancel_event=cancel
        )
    except RunnerError as exc:
        raise from_runner_error(exc, f"environment_report for {python}") from None
    p = outcome.payload
    return Environment(
        interpreter=str(python),
        python=p["python"],
        platform=p["platform"],
        torch=p.get("torch"),
        driver=p.get("driver"),
        key_packages=p["key_packages"],
        installed=p["installed"],
        env=p["env"],
    )


def diff_environments(a: Environment, b: Environment) -> list[Difference]:
    out: list[Difference] = []
    if a.python.get("version") != b.python.get("version"):
        out.append(Difference(item="python", a=a.python.get("version"), b=b.python.get("version"), key=True))
    for k in ("system", "machine", "release"):
        if a.platform.get(k) != b.platform.get(k):
            out.append(
                Difference(item=f"platform.{k}", a=a.platform.get(k), b=b.platform.get(k), key=k != "release")
            )
    ta, tb = a.torch or {}, b.torch or {}
    if (a.torch is None) != (b.torch is None):
        out.append(
            Difference(
                item="torch",
                a=ta.get("version", a.installed.get("torch")) if a.torch is not None else None,
                b=tb.get("version", b.installed.get("torch")) if b.torch is not None else None,
                key=True,
            )
        )
    else:
        for f in TORCH_FIELDS:
            if ta.get(f) != tb.get(f):
                out.append(
                    Difference(
                        item=f"torch.{f}" if f != "version" else "torch", a=ta.get(f), b=tb.get(f), key=True
                    )
                )
    da, db = (a.driver or {}).get("driver_version"), (b.driver or {}).get("driver_version")
    if da != db:
        out.append(Difference(item="nvidia_driver", a=da, b=db, key=True))
    key_names = set(a.key_packages) | set(b.key_packages)
    for name in sorted(set(a.installed) | set(b.installed)):
        if name == "torch" and any(d.item == "torch" for d in out):
            continue
        va, vb = a.installed.get(name), b.installed.get(name)
        if va != vb:
            out.append(Difference(item=f"package:{name}", a=va, b=vb, key=name in key_names))
    for var in sorted(set(a.env) | set(b.env)):
        if a.env.get(var) != b.env.get(var):
            out.append(Difference(item=f"env:{var}", a=a.env.get(var), b=b.env.get(var), key=True))
    out.sort(key=lambda d: (not d.key,))
    return out


def environment_report(
    pythons: list[Path],
    *,
    cwd: Path,
    import_torch: bool = True,
    timeout_s: float = 120.0,
    cancel_event: threading.Event | None = None,
) -> EnvironmentReport:
    if not 1 <= len(pythons) <= 2:
        raise AnalysisError(
            "give one interpreter, or two to compare", "pass python and optionally compare_python"
        )
    with ThreadPoolExecutor(max_workers=len(pythons)) as pool:
        futures = [pool.submit(_collect, p, cwd, import_torch, timeout_s, cancel_event) for p in pythons]
        envs = [f.result() for f in futures]
    report = EnvironmentReport(environments=envs)
    if len(envs) == 2:
        report.differences = diff_environments(envs[0], envs[1])
        if not report.differences:
            report.notes.append("the two interpreters have the same versions and variables")
    report.notes.append(
        "environment variables are those the interpreter inherits from the trainsleuth server; a job "
        "launched elsewhere (scheduler, container) may see others"
    )
    return report

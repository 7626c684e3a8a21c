"""Installable as users expect (issue 18.7): `uv build` makes a wheel and an sdist that pass
`twine check`; the wheel installs into a fresh venv (core dependencies only, <= 150 MB), serves and
lists its tools from there; and each optional feature it lacks names the extra that brings it.

Needs the package index (or uv's cache) to install the core dependencies, like `make install`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
UV = str(Path(sys.executable).parent / "uv")
CORE_LIMIT_BYTES = 150_000_000


def sh(*argv: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    proc = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, (
        f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    )
    return proc.stdout


@pytest.mark.slow
def test_built_wheel_installs_serves_and_names_missing_extras(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    sh(UV, "build", "--out-dir", str(dist), cwd=REPO)
    wheel = next(dist.glob("trainsleuth-*.whl"))
    sdist = next(dist.glob("trainsleuth-*.tar.gz"))
    sh(sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist))

    venv = tmp_path / "venv"
    sh(UV, "venv", "-q", "--python", sys.executable, str(venv))
    sh(UV, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), str(wheel))
    size = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file() and not f.is_symlink())
    assert size <= CORE_LIMIT_BYTES, f"core install is {size / 1e6:.1f} MB"
    site = next(venv.glob("lib/python*/site-packages"))
    for heavy in ("matplotlib", "tensorboard", "pyarrow", "uv", "torch"):
        assert not (site / heavy).exists(), f"{heavy} is installed by the core install"

    ws = tmp_path / "ws"
    ws.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"  # no uv anywhere
    trainsleuth = str(venv / "bin" / "trainsleuth")
    # `client tools` starts `trainsleuth serve` from the same installation and lists its tools over stdio.
    tools = json.loads(sh(trainsleuth, "client", "tools", "--json", cwd=ws, env=env))
    names = {t["name"] for t in tools}
    assert {"start_investigation", "probe_gradients", "bisect_versions", "get_job"} <= names
    assert all("inputSchema" in t for t in tools)

    lines = [f"step {i} | loss {3.0 * 0.99**i:.4f} | lr 1e-4" for i in range(1, 200)]
    (ws / "train.log").write_text("\n".join(lines) + "\n")
    report = json.loads(
        sh(trainsleuth, "logs", "analyze", "train.log", "--plot", "p.png", "--json", cwd=ws, env=env)
    )
    assert any("[plots]" in n for n in report["notes"]), report["notes"]
    (ws / "events.out.tfevents.1.host").write_bytes(b"\x00" * 64)
    tb = subprocess.run(
        [trainsleuth, "logs", "analyze", "events.out.tfevents.1.host"], cwd=ws, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert tb.returncode != 0 and "trainsleuth[tensorboard]" in tb.stdout + tb.stderr
    rows = "".join(f"{i},{2.0 - i * 1e-6:.6f},0.0001\n" for i in range(110_000))
    (ws / "metrics.csv").write_text("step,loss,lr\n" + rows)
    assert (ws / "metrics.csv").stat().st_size > 2 << 20
    report = json.loads(sh(trainsleuth, "logs", "analyze", "metrics.csv", "--json", cwd=ws, env=env))
    assert any("[fast-csv]" in n for n in report["notes"]), report["notes"]
    bisect = subprocess.run(
        [trainsleuth, "client", "call", "bisect_versions", "--arg", "package=tsdemo",
         "--arg", 'versions=["1.0","1.1"]', "--arg", "command=true"],
        cwd=ws, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert bisect.returncode == 3 and "trainsleuth[bisect]" in bisect.stderr, bisect.stderr

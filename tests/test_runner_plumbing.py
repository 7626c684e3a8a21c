"""Child processes and the entrypoint contract loader, on real subprocesses and a real torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from trainsleuth.process import run_process
from trainsleuth.tools.runners.launch import RunnerError, run_runner

SPAWNER = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(300)
"""


def _wait_for(path: Path) -> int:
    for _ in range(200):
        if path.exists() and path.read_text():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError("child pid never written")


def test_timeout_kills_the_whole_tree(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    result = run_process([sys.executable, "-c", SPAWNER, str(pidfile)], timeout_s=3)
    assert result.timed_out and not result.ok
    child = _wait_for(pidfile)
    time.sleep(0.2)
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_cancel_kills_the_whole_tree(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    cancel = threading.Event()
    threading.Timer(1.5, cancel.set).start()
    result = run_process([sys.executable, "-c", SPAWNER, str(pidfile)], timeout_s=60, cancel_event=cancel)
    assert result.cancelled and result.duration_s < 30
    child = _wait_for(pidfile)
    time.sleep(0.2)
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_memory_limit() -> None:
    hog = "x = bytearray(600 * 1024 * 1024); import time; time.sleep(30)"
    result = run_process([sys.executable, "-c", hog], timeout_s=60, memory_limit_mb=200)
    assert result.memory_exceeded and not result.ok


def test_output_tails_are_bounded() -> None:
    result = run_process(
        [sys.executable, "-c", "print('a' * 100000); print('END')"], timeout_s=30, tail_chars=500
    )
    assert result.ok and len(result.stdout_tail) <= 500 and result.stdout_tail.rstrip().endswith("END")


def test_missing_program_raises() -> None:
    with pytest.raises(FileNotFoundError):
        run_process(["/nonexistent/program"], timeout_s=5)


GOOD = """
import torch
def make():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    return {"model": model, "batch": (torch.randn(2, 4), torch.randn(2, 1)), "extra": 1,
            "optimizer": torch.optim.SGD(model.parameters(), lr=0.1)}
"""


def check(tmp_path: Path, source: str, spec: str = "ep.py:make", **kw: object) -> dict:  # type: ignore[type-arg]
    (tmp_path / "ep.py").write_text(textwrap.dedent(source))
    outcome = run_runner(
        "check_entrypoint.py",
        ["--entrypoint", spec],
        python=Path(sys.executable),
        cwd=tmp_path,
        timeout_s=120,
        **kw,
    )  # type: ignore[arg-type]
    return outcome.payload["report"]  # type: ignore[no-any-return]


def test_good_entrypoint(tmp_path: Path) -> None:
    report = check(tmp_path, GOOD)
    assert report["num_parameters"] == 4 * 8 + 8 + 8 + 1
    assert report["keys"] == ["batches", "model", "optimizer"]
    assert report["unknown_keys"] == ["extra"]


@pytest.mark.parametrize(
    ("source", "spec", "kind", "key"),
    [
        (GOOD, "missing.py:make", "entrypoint_not_found", None),
        (GOOD, "ep.py:nothing", "function_not_found", None),
        (GOOD, "ep.py", "bad_entrypoint", None),
        ("import not_a_real_module\n", "ep.py:make", "import_error", None),
        ("def make():\n    raise RuntimeError('boom')\n", "ep.py:make", "entrypoint_raised", None),
        ("def make():\n    return {'batch': 1}\n", "ep.py:make", "contract_error", "model"),
        (
            "import torch\ndef make():\n    return {'model': torch.nn.Linear(2, 2), 'batch': 'text'}\n",
            "ep.py:make",
            "contract_error",
            "batch",
        ),
        (
            "import torch\ndef make():\n    return {'model': torch.nn.Linear(2, 2), 'batch': torch.ones(2),"
            " 'optimizer': 3}\n",
            "ep.py:make",
            "contract_error",
            "optimizer",
        ),
    ],
)
def test_entrypoint_errors_name_the_problem(
    tmp_path: Path, source: str, spec: str, kind: str, key: str | None
) -> None:
    with pytest.raises(RunnerError) as info:
        check(tmp_path, source, spec)
    assert info.value.kind == kind, info.value.message
    assert info.value.key == key


def test_module_style_entrypoint(tmp_path: Path) -> None:
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text(textwrap.dedent(GOOD))
    report = check(tmp_path, "", "mypkg.train:make")
    assert report["model_class"] == "Sequential"


def test_hanging_entrypoint_times_out(tmp_path: Path) -> None:
    (tmp_path / "ep.py").write_text("import time\ndef make():\n    time.sleep(600)\n")
    with pytest.raises(RunnerError) as info:
        run_runner(
            "check_entrypoint.py", ["--entrypoint", "ep.py:make"], python=Path(sys.executable), cwd=tmp_path,
            timeout_s=3,
        )  # fmt: skip
    assert info.value.kind == "timeout"


def test_interpreter_without_torch(tmp_path: Path) -> None:
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (tmp_path / "ep.py").write_text(GOOD)
    with pytest.raises(RunnerError) as info:
        run_runner(
            "check_entrypoint.py", ["--entrypoint", "ep.py:make"], python=venv / "bin" / "python", cwd=tmp_path,
            timeout_s=60,
        )  # fmt: skip
    assert info.value.kind == "no_torch"
    assert str(venv / "bin" / "python") in info.value.message

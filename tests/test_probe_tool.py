"""probe_gradients / read_probe_run through a real in-memory MCP client, with real subprocesses."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mcp import Client

import trainsleuth.probe
from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "probe"

BAD = {
    "import_error.py": "import torch\nimport not_a_real_module_xyz\ndef make():\n    return {}\n",
    "raises.py": "def make():\n    raise ValueError('dataset path missing')\n",
    "wrong_key.py": "import torch\ndef make():\n    return {'model': torch.nn.Linear(2, 1), 'batch': (torch.randn(2, 2),), 'loss_fn': 3}\n",
    "hang.py": "import time\ndef make():\n    time.sleep(600)\n",
    "hog.py": (
        "import time, torch\ndef make():\n    xs = []\n    for _ in range(60):\n"
        "        xs.append(torch.ones(16, 1024, 1024))\n        time.sleep(0.05)\n"
        "    return {'model': torch.nn.Linear(2, 1), 'batch': xs[0]}\n"
    ),
    "noloss.py": "import torch\ndef make():\n    return {'model': torch.nn.Linear(2, 3), 'batch': torch.randn(4, 2)}\n",
}


@pytest.fixture
def ws(workspace: Path) -> Path:
    shutil.copy(EXAMPLES / "broken_nan_log.py", workspace / "nan_log.py")
    for name, text in BAD.items():
        (workspace / name).write_text(text)
    return workspace


async def _call(ws: Path, args: dict, **config: object):  # type: ignore[no-untyped-def]
    server, _ = build_server(ServerConfig(workspaces=[ws], **config))  # type: ignore[arg-type]
    async with Client(server) as client:
        return await client.call_tool("probe_gradients", args)


@pytest.mark.anyio
async def test_probe_reports_origin_table_and_image(ws: Path) -> None:
    r = await _call(ws, {"entrypoint": "nan_log.py:broken", "steps": 3})
    assert not r.is_error, r.content[0].text
    data = r.structured_content
    codes = {(f["code"], f["module"]) for f in data["findings"]}
    assert ("nonfinite_forward", "encoder.logscale") in codes
    assert data["healthy"] is False and data["interpreter"] == sys.executable
    assert "nonfinite_forward" in r.content[0].text
    fixed = await _call(ws, {"entrypoint": "nan_log.py:fixed", "steps": 4})
    assert not fixed.is_error and fixed.structured_content["healthy"] is True
    assert any(row["module"] == "encoder.proj" for row in fixed.structured_content["table"])
    images = [c for c in fixed.content if c.type == "image"]
    assert images and images[0].mime_type == "image/png"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("entrypoint", "needle"),
    [
        ("missing.py:make", "does not exist"),
        ("nan_log.py:nope", "defines no function 'nope'"),
        ("import_error.py:make", "not_a_real_module_xyz"),
        ("raises.py:make", "dataset path missing"),
        ("wrong_key.py:make", "'loss_fn'"),
        ("noloss.py:make", "loss_fn"),
        ("no_colon", "must look like"),
    ],
)
async def test_bad_entrypoints_get_clear_errors(ws: Path, entrypoint: str, needle: str) -> None:
    r = await _call(ws, {"entrypoint": entrypoint, "steps": 1})
    assert r.is_error
    assert needle in r.content[0].text
    assert "Next step" in r.content[0].text


@pytest.mark.anyio
async def test_hang_is_killed_by_timeout(ws: Path) -> None:
    r = await _call(ws, {"entrypoint": "hang.py:make", "timeout_s": 4})
    assert r.is_error and "did not finish within 4s" in r.content[0].text


@pytest.mark.anyio
async def test_memory_limit_reports_out_of_memory(ws: Path) -> None:
    r = await _call(ws, {"entrypoint": "hog.py:make", "memory_limit_mb": 700, "timeout_s": 120})
    assert r.is_error and "memory" in r.content[0].text.lower()


@pytest.mark.anyio
async def test_interpreter_outside_workspace_is_refused(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    fake = outside / "python"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    r = await _call(ws, {"entrypoint": "nan_log.py:broken", "python": str(fake)})
    assert r.is_error and "not allowed" in r.content[0].text and "--allow-python" in r.content[0].text


@pytest.mark.anyio
async def test_interpreter_without_torch_says_which(ws: Path) -> None:
    venv = ws / "plainenv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    r = await _call(ws, {"entrypoint": "nan_log.py:broken", "python": str(python)})
    assert r.is_error
    text = r.content[0].text
    assert "torch is not installed" in text and str(python) in text


@pytest.mark.anyio
async def test_probe_result_is_stored_as_evidence_when_asked(ws: Path) -> None:
    server, _ = build_server(ServerConfig(workspaces=[ws]))
    async with Client(server) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"probe_gradients", "read_probe_run"} <= tools
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert not (listed["probe_gradients"].description or "").startswith("[not available yet]")


@pytest.mark.anyio
async def test_read_probe_run_on_a_live_run(ws: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    run_dir = ws / "runs" / "probe"
    with trainsleuth.probe.attach(model, opt, every=2, run_dir=run_dir) as handle:
        for _ in range(10):
            x = torch.randn(16, 4)
            loss = (model(x) - x[:, :1]).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            handle.record_loss(loss)
    server, _ = build_server(ServerConfig(workspaces=[ws]))
    async with Client(server) as client:
        r = await client.call_tool("read_probe_run", {"run_dir": "runs/probe"})
        assert not r.is_error, r.content[0].text
        data = r.structured_content
        assert data["steps_recorded"] == 5 and data["first_step"] == 0 and data["last_step"] == 8
        assert data["healthy"] is True
        assert len(data["trends"]["loss"]) == 5
        bad = await client.call_tool("read_probe_run", {"run_dir": "."})
        assert bad.is_error and "no probe run" in bad.content[0].text


def test_cancel_event_kills_the_probe(ws: Path) -> None:
    import threading

    from trainsleuth.tools.probe import ProbeError, run_probe

    cancel = threading.Event()
    threading.Timer(2.0, cancel.set).start()
    with pytest.raises(ProbeError) as info:
        run_probe("hang.py:make", python=Path(sys.executable), cwd=ws, timeout_s=120, cancel_event=cancel)
    assert info.value.kind == "cancelled"

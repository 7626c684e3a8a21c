"""environment_report over a real MCP client, with real virtual environments and locally built wheels."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig

UV = Path(sys.executable).parent / "uv"


def _wheel(folder: Path, version: str) -> Path:
    """A minimal, valid pure-Python wheel of the distribution `tsenv-demo`."""
    files = {
        "tsenv_demo/__init__.py": f"__version__ = '{version}'\n",
        f"tsenv_demo-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: tsenv-demo\nVersion: {version}\n",
        f"tsenv_demo-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append(f"tsenv_demo-{version}.dist-info/RECORD,,")
    files[f"tsenv_demo-{version}.dist-info/RECORD"] = "\n".join(record) + "\n"
    path = folder / f"tsenv_demo-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def _venv(path: Path, wheel: Path, system_site: bool) -> Path:
    argv = [sys.executable, "-m", "venv", "--without-pip", str(path)]
    if system_site:
        argv.insert(4, "--system-site-packages")
    subprocess.run(argv, check=True, capture_output=True)
    python = path / "bin" / "python"
    subprocess.run(
        [str(UV), "pip", "install", "--python", str(python), "--offline", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
    )
    return python


@pytest.mark.anyio
async def test_two_environments_are_diffed(workspace: Path, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    working = _venv(workspace / "env-working", _wheel(wheels, "1.0"), system_site=False)
    broken = _venv(workspace / "env-broken", _wheel(wheels, "2.0"), system_site=True)
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        result = await client.call_tool(
            "environment_report",
            {
                "python": "env-working/bin/python",
                "compare_python": "env-broken/bin/python",
                "import_torch": False,
            },
        )
    assert not result.is_error, result.content[0].text
    data = result.structured_content
    a, b = data["environments"]
    assert a["interpreter"] == str(working) and b["interpreter"] == str(broken)
    assert a["installed"] == {"tsenv-demo": "1.0"}
    assert a["torch"] is None and a["python"]["in_venv"] is True
    assert a["key_packages"]["transformers"] is None
    diffs = {d["item"]: d for d in data["differences"]}
    assert diffs["package:tsenv-demo"]["a"] == "1.0" and diffs["package:tsenv-demo"]["b"] == "2.0"
    # whatever the base interpreter has installed is visible only to the --system-site-packages venv
    for name, version in b["installed"].items():
        if name != "tsenv-demo":
            assert diffs[f"package:{name}"] == {
                "item": f"package:{name}",
                "a": None,
                "b": version,
                "key": diffs[f"package:{name}"]["key"],
            }
    assert "python" not in diffs  # same base interpreter
    text = result.content[0].text
    assert "package:tsenv-demo: 1.0 -> 2.0" in text and "torch: not installed" in text


@pytest.mark.anyio
async def test_server_interpreter_reports_torch_and_variables(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("HF_TOKEN", "secret-value")
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        result = await client.call_tool("environment_report", {})
    assert not result.is_error, result.content[0].text
    [env] = result.structured_content["environments"]
    assert env["interpreter"] == sys.executable
    assert env["torch"]["version"] == torch.__version__
    assert env["torch"]["cuda"] == torch.version.cuda
    assert env["torch"]["gloo_available"] is True
    assert env["key_packages"]["torch"] == env["installed"]["torch"]
    assert env["key_packages"]["safetensors"]
    assert env["env"]["NCCL_DEBUG"] == "INFO" and env["env"]["CUDA_VISIBLE_DEVICES"] == ""
    assert env["env"]["HF_TOKEN"] == "<set, hidden>"
    assert "secret-value" not in result.content[0].text


@pytest.mark.anyio
async def test_interpreters_outside_the_workspace_need_permission(workspace: Path, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    outside = _venv(tmp_path / "outside-env", _wheel(wheels, "3.0"), system_site=False)
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        r = await client.call_tool("environment_report", {"python": str(outside)})
        assert r.is_error and "--allow-python" in r.content[0].text
        r = await client.call_tool("environment_report", {"python": "no-such-python-xyz"})
        assert r.is_error and "not found" in r.content[0].text
    server, _ = build_server(ServerConfig(workspaces=[workspace], allowed_interpreters=[outside]))
    async with Client(server) as client:
        r = await client.call_tool("environment_report", {"python": str(outside), "import_torch": False})
        assert not r.is_error, r.content[0].text
        assert r.structured_content["environments"][0]["installed"] == {"tsenv-demo": "3.0"}

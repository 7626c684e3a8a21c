"""Easy first use: a training script as it is (scaffold), and a script given as an entrypoint.

Real scripts (tests/data/scripts/: a plain loop, a nanoGPT-style script, an HF Trainer script, a
broken regression loop) run through the public CLI in subprocesses and through a real in-memory MCP
client; the written entrypoint lands in WORKSPACE/.trainsleuth/scratch/.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig

SCRIPTS = Path(__file__).resolve().parent / "data" / "scripts"

OPAQUE_LOSS = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 2)
for _ in range(3):
    out = model(x)
    diff = out - y
    loss = (diff.abs() ** 1.5).mean()  # a hand-written loss the capture cannot replay
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


HAND_WRITTEN_LOSS = """\
import torch


def huber(pred, target, delta=1.0):
    diff = pred{squeeze} - target
    return torch.where(diff.abs() <= delta, 0.5 * diff**2, delta * (diff.abs() - 0.5 * delta)).mean()
"""

HAND_WRITTEN_TRAIN = """\
import torch
from torch import nn

from losses import huber

torch.manual_seed(0)
x = torch.randn(256, 8)
y = x[:, 0] * 2.0 - x[:, 1]
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
for i in range(0, 256, 32):
    loss = huber(model(x[i : i + 32]), y[i : i + 32])
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.fixture
def ws(workspace: Path) -> Path:
    for f in SCRIPTS.glob("*.py"):
        shutil.copy(f, workspace / f.name)
    (workspace / "opaque_loss_train.py").write_text(OPAQUE_LOSS)
    return workspace


def cli(ws: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run(
        [sys.executable, "-m", "trainsleuth", "probe", *args, "--json", "--steps", "3"],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}, proc.stderr


def test_scaffold_plain_loop_is_healthy_and_written_to_scratch(ws: Path) -> None:
    rc, out, err = cli(ws, "--scaffold", "plain_loop_train.py", "--script-args", "--epochs 1 --batch-size 8")
    assert rc == 0 and out["ok"], err
    assert out["healthy"] is True, out["findings"]
    path = Path(out["scaffold"]["path"])
    assert path.parent == ws / ".trainsleuth" / "scratch" and path.name == "probe_plain_loop_train.py"
    assert out["scaffold"]["argv"] == ["--epochs", "1", "--batch-size", "8"]
    assert (ws / ".trainsleuth" / ".gitignore").exists()
    assert out["mode"] == "loss_fn" and out["steps"] == 3


def test_scaffold_finds_the_broadcast_in_a_broken_script(ws: Path) -> None:
    rc, out, err = cli(ws, "--scaffold", "broken_plain_loop_train.py")
    assert rc == 0 and out["ok"], err
    (f,) = [f for f in out["findings"] if f["code"] == "loss_broadcast"]
    assert f["evidence"]["operation"] == "mse_loss" and f["evidence"]["result_shape"] == [32, 32]
    assert f["module"] == "2" and f["evidence"]["params"] == ["2.weight", "2.bias"]


@pytest.mark.parametrize("squeeze", ["", ".squeeze(-1)"])
def test_scaffold_replays_a_loss_function_of_the_scripts_own_code(ws: Path, squeeze: str) -> None:
    """A hand-written loss in the project's own module (the agent benchmark's house_regression): the
    capture records the function called on the model's output and replays it with the batch's target,
    so the broadcast is found (named with the user's line), and the fixed loss is healthy."""
    (ws / "losses.py").write_text(HAND_WRITTEN_LOSS.format(squeeze=squeeze))
    (ws / "handwritten_train.py").write_text(HAND_WRITTEN_TRAIN)
    rc, out, err = cli(ws, "--scaffold", "handwritten_train.py")
    assert rc == 0 and out["ok"], err
    broadcast = [f for f in out["findings"] if f["code"] == "loss_broadcast"]
    if squeeze:
        assert out["healthy"] is True and not broadcast, out["findings"]
        assert out["losses"][-1] < out["losses"][0]
        return
    (f,) = broadcast
    assert f["evidence"]["result_shape"] == [32, 32] and f["evidence"]["where"] == "losses.py:5 in huber"
    assert f["module"] == "2" and "losses.py:5 in huber" in f["message"]


def test_scaffold_nanogpt_style_script_uses_its_own_scaled_loss(ws: Path) -> None:
    rc, out, err = cli(ws, "--scaffold", "nanogpt_train.py", "--script-args=--max_iters=2")
    assert rc == 0 and out["ok"], err
    assert out["healthy"] is True, out["findings"]
    # the model returns (logits, loss) and the script backpropagates loss / gradient_accumulation_steps (2)
    assert 2.0 < out["losses"][0] < 2.8


def test_scaffold_hf_trainer_script(ws: Path) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    rc, out, err = cli(ws, "--scaffold", "hf_trainer_train.py", f"--script-args=--output_dir={ws / 'out'}")
    assert rc == 0 and out["ok"], err
    assert out["healthy"] is True, out["findings"]


def test_scaffold_asks_for_the_loss_it_cannot_infer(ws: Path) -> None:
    rc, out, err = cli(ws, "--scaffold", "opaque_loss_train.py")
    assert rc != 0 and out["ok"] is False
    assert out["error"]["kind"] == "scaffold_incomplete"
    assert "opaque_loss_train.py:13" in out["error"]["message"]  # the line that calls backward()
    assert "diff.abs() ** 1.5" in out["error"]["message"]
    assert "LOSS_FN" in out["error"]["next_step"]
    # write the loss as asked, probe the scaffold again: it runs
    scaffold = ws / ".trainsleuth" / "scratch" / "probe_opaque_loss_train.py"
    text = scaffold.read_text()
    text = text.replace(
        '    raise NotImplementedError("write the loss here, as the script computes it from `out`")',
        "    y = batch['kwargs'].get('y')\n    return (out.abs() ** 1.5).mean()",
    ).replace("LOSS_FN = None", "LOSS_FN = loss_fn")
    scaffold.write_text(text)
    rc, out, err = cli(ws, f"{scaffold}:make")
    assert rc == 0 and out["ok"], err


def test_script_given_as_entrypoint_says_so_and_how_to_scaffold(ws: Path) -> None:
    rc, out, _ = cli(ws, "nanogpt_train.py")
    assert rc != 0 and out["error"]["kind"] == "script_entrypoint"
    assert "--scaffold nanogpt_train.py" in out["error"]["next_step"]
    # a script whose import parses arguments (SystemExit) or trains is recognised as a script too
    rc, out, _ = cli(ws, "nanogpt_train.py:model")
    assert out["error"]["kind"] == "script_entrypoint" and "--scaffold" in out["error"]["message"]
    assert out["error"]["traceback"]
    rc, out, _ = cli(ws, "broken_plain_loop_train.py:model")
    assert out["error"]["kind"] == "script_entrypoint" and "runs training" in out["error"]["message"]
    # a script's main(): parses the command line (here the runner's own), or trains and returns nothing
    rc, out, _ = cli(ws, "plain_loop_train.py:main")
    assert out["error"]["kind"] == "script_entrypoint" and "SystemExit: 2" in out["error"]["message"]
    (ws / "trains.py").write_text(
        "import torch\n"
        "def main():\n"
        "    model = torch.nn.Linear(3, 1)\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    for _ in range(5):\n"
        "        opt.zero_grad()\n"
        "        model(torch.randn(4, 3)).pow(2).mean().backward()\n"
        "        opt.step()\n"
    )
    rc, out, _ = cli(ws, "trains.py:main")
    assert out["error"]["kind"] == "script_entrypoint"
    assert "returned None after 5 optimizer step(s)" in out["error"]["message"]


async def _mcp(ws: Path, tool: str, args: dict[str, Any]) -> Any:
    # probe_gradients is long-running: wait for its answer here rather than receive a job id
    server, _ = build_server(ServerConfig(workspaces=[ws], call_wait_s=600))
    async with Client(server) as client:
        return await client.call_tool(tool, args)


@pytest.mark.anyio
async def test_mcp_scaffold_argument_and_script_entrypoint_message(ws: Path) -> None:
    r = await _mcp(ws, "probe_gradients", {"scaffold": "broken_plain_loop_train.py", "steps": 2})
    assert not r.is_error, r.content[0].text
    data = r.structured_content
    assert data["scaffold_path"].endswith("probe_broken_plain_loop_train.py")
    assert "loss_broadcast" in {f["code"] for f in data["findings"]}
    r = await _mcp(ws, "probe_gradients", {"entrypoint": "plain_loop_train.py"})
    assert r.is_error and "scaffold='plain_loop_train.py'" in r.content[0].text
    r = await _mcp(ws, "probe_gradients", {"steps": 2})
    assert r.is_error and "exactly one of command" in r.content[0].text and "got none" in r.content[0].text


@pytest.mark.anyio
async def test_entrypoint_contract_is_a_resource(ws: Path) -> None:
    server, _ = build_server(ServerConfig(workspaces=[ws]))
    async with Client(server) as client:
        listed = await client.list_resources()
        assert "probe://entrypoint" in {str(r.uri) for r in listed.resources}
        res = await client.read_resource("probe://entrypoint")
        text = res.contents[0].text  # type: ignore[union-attr]
        assert "scaffold" in text and "step_fn" in text and "eval_fn" in text and "scheduler" in text
        assert text.index("command=") < text.index("scaffold=")  # the user's own command comes first
        tools = await client.list_tools()
        tool = next(t for t in tools.tools if t.name == "probe_gradients")
        assert "training command" in (tool.description or "")
        assert "probe://entrypoint" in tool.input_schema["properties"]["entrypoint"]["description"]

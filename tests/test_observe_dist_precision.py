"""compare_precision command=...: the model's real first training forward replayed in fp32 and bf16, from the
user's own command, without changing the run."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from mcp import Client
from observe_dist_helpers import project

from benchmarks.agent.build import build_case
from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.tools.observe import require_training, run_observed

PY = Path(sys.executable)


@pytest.mark.anyio
async def test_bf16_motion_from_its_own_command(tmp_path: Path) -> None:
    """The agent case bf16_motion in one call: the loss is placed in MotionNet.forward, between modules."""
    ws = build_case("bf16_motion", tmp_path / "case")
    server, _ = build_server(ServerConfig(workspaces=[ws]))
    async with Client(server) as client:
        result = await client.call_tool(
            "compare_precision", {"command": "python train.py --bf16", "dtypes": ["bf16"]}
        )
    assert not result.is_error, result.content[0].text
    data = result.structured_content
    assert data["command"] == "python train.py --bf16" and data["device"] == "cpu"
    first = data["findings"][0]
    assert (
        first["code"] == "precision_mismatch" and first["severity"] == "error" and first["module"] == "head.0"
    )
    ev = first["evidence"]
    assert ev["lost_between_modules"] is True and ev["arises_in"] == "<model>" and ev["cancellation"] is True
    assert ev["previous_module"] == "position" and ev["previous_output_rel_error"] < 0.01
    text = result.content[0].text
    assert "INPUT of head.0" in text and "in MotionNet.forward" in text and "so large values cancel" in text
    assert "replayed the forward of model (MotionNet)" in text and "train.py:24 in main" in text
    assert (ws / "train.py").read_text().count("--bf16") == 1  # the user's files as they were
    assert not list(ws.glob("*.pt"))


BN_DROPOUT = """
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(10):
    x = torch.randn(32, 6)
    loss = (model(x).squeeze(1) - x.sum(1)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    print(f"step {step} loss {loss.item():.9f} mean {model[1].running_mean.sum().item():.9f}", flush=True)
"""


def test_the_replay_leaves_the_training_run_as_it_was(tmp_path: Path) -> None:
    """BatchNorm statistics, dropout's random stream and the data drawn after it: identical with the replay."""
    ws = project(tmp_path)
    (ws / "bn_dropout.py").write_text(textwrap.dedent(BN_DROPOUT))
    runs = {}
    for plugins in ([], ["precision"]):
        run = run_observed(
            "python bn_dropout.py",
            python=PY,
            workspace=ws,
            plugins=plugins,
            steps=4,
            options={"precision": {"dtypes": ["bf16"]}},
        )
        [rep] = require_training(run)
        runs[tuple(plugins)] = (rep, [line for line in run.process.stdout_tail.splitlines() if line])
    plain, replayed = runs[()], runs[("precision",)]
    # the run stops inside the 4th optimizer step, before its print: three lines, the same with the replay
    assert replayed[1] == plain[1] and len(plain[1]) == 3, (plain[1], replayed[1])
    losses = [[it["backward"][0]["loss"] for it in rep["iterations"]] for rep, _ in (plain, replayed)]
    assert losses[0] == losses[1] and len(losses[0]) == 4
    [replay] = replayed[0]["plugins"]["precision"]["replays"]
    assert replay["label"] == "model" and replay["step"] == 1 and "bf16" in replay["results"]
    assert [r["calls"] for r in replayed[0]["roots"]] == [r["calls"] for r in plain[0]["roots"]] == [4]

"""compare_precision on the user's own command (issue 26): the first observed forward replayed in fp32 and
bf16/fp16 on the inputs it received, the run itself left as it would have been."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.tools.distributed.errors import AnalysisError
from trainsleuth.tools.observe import require_training, run_observed
from trainsleuth.tools.precision.observed import compare_command

PY = Path(sys.executable)
CASE = Path(__file__).resolve().parents[1] / "benchmarks" / "agent" / "cases" / "bf16_motion"
pytestmark = pytest.mark.slow


def _git(ws: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=ws, check=True)


def _case(tmp_path: Path, fixed: bool = False) -> Path:
    ws = tmp_path / ("fixed" if fixed else "case")
    ws.mkdir()
    for f in [*(CASE / "history" / "01-initial").glob("*.py"), CASE / "history" / "02-bf16" / "train.py"]:
        shutil.copy(f, ws / f.name)
    _git(ws, "init", "-q")
    _git(ws, "add", "-A")
    _git(ws, "commit", "-qm", "case")
    if fixed:
        _git(ws, "apply", str(CASE / "fix.patch"))
    return ws


@pytest.mark.anyio
async def test_bf16_motion_from_its_own_train_py(tmp_path: Path) -> None:
    ws = _case(tmp_path)
    server, _ = build_server(ServerConfig(workspaces=[ws]))
    async with Client(server) as client:
        r = await client.call_tool(
            "compare_precision", {"command": "python train.py --bf16", "dtypes": ["bf16"]}
        )
    assert not r.is_error, r.content[0].text
    data = r.structured_content
    assert data["healthy"] is False and data["command"] == "python train.py --bf16"
    [f] = data["findings"]
    assert f["code"] == "precision_mismatch" and f["severity"] == "error" and f["module"] == "head.0"
    ev = f["evidence"]
    assert ev["lost_between_modules"] is True and ev["arises_in"] == "<model>"
    assert ev["previous_module"] == "position" and ev["cancellation"] is True
    text = r.content[0].text
    assert "INPUT of head.0" in text and "in MotionNet.forward" in text
    assert "the run itself computes this forward under bfloat16 autocast" in text


def test_the_fixed_model_is_quiet_and_fp32_runs_are_judged_too(tmp_path: Path) -> None:
    ws = _case(tmp_path, fixed=True)
    report = compare_command("python train.py --bf16", python=PY, workspace=ws, dtypes=["bf16"])
    assert report.healthy, report.render_text()
    # the run's own precision does not matter: the replay sets fp32 and bf16 itself
    broken = _case(tmp_path)
    report = compare_command("python train.py", python=PY, workspace=broken, dtypes=["bf16"])
    assert not report.healthy and report.findings[0].module == "head.0"


STATEFUL = """
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(6):
    x = torch.randn(16, 6)
    loss = nn.functional.mse_loss(model(x), x[:, :1])
    opt.zero_grad(); loss.backward(); opt.step()
print("running_mean", float(model[1].running_mean.sum()))
"""


def test_the_replay_leaves_the_training_run_unchanged(tmp_path: Path) -> None:
    """Dropout draws and BatchNorm statistics: the same losses with and without the replay."""
    ws = tmp_path / "stateful"
    ws.mkdir()
    (ws / "train.py").write_text(textwrap.dedent(STATEFUL))
    losses = {}
    for plugins in ([], ["precision"]):
        run = run_observed(
            "python train.py", python=PY, workspace=ws, plugins=plugins, steps=3, options={"precision": {}}
        )
        [rep] = require_training(run)
        assert rep["plugin_errors"] == {}
        losses[tuple(plugins)] = [it["backward"][0]["loss"] for it in rep["iterations"]]
        if plugins:
            section = rep["plugins"]["precision"]
            assert section["ok"] and section["step"] == 1 and "bf16" in section["results"]
    assert losses[()] == losses[("precision",)] and len(losses[()]) == 3


def test_a_command_that_never_trains_is_explained(tmp_path: Path) -> None:
    ws = tmp_path / "noopt"
    ws.mkdir()
    (ws / "eval.py").write_text(
        "import torch\nm = torch.nn.Linear(2, 2)\nwith torch.no_grad():\n    m(torch.ones(1, 2))\n"
    )
    with pytest.raises(AnalysisError, match="no optimizer ever stepped"):
        compare_command("python eval.py", python=PY, workspace=ws)
    with pytest.raises(AnalysisError, match="unknown dtype"):
        compare_command("python eval.py", python=PY, workspace=ws, dtypes=["fp8"])

"""compare_precision over a real MCP client: fp32 against bf16/fp16 autocast on CPU."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "distributed"


async def _compare(workspace: Path, args: dict[str, Any]) -> Any:
    shutil.copy(EXAMPLES / "bf16_sensitive.py", workspace / "bf16_sensitive.py")
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        return await client.call_tool("compare_precision", args)


@pytest.mark.anyio
async def test_bf16_sensitive_op_is_localised(workspace: Path) -> None:
    result = await _compare(workspace, {"entrypoint": "bf16_sensitive.py:entry"})
    assert not result.is_error, result.content[0].text
    data = result.structured_content
    assert data["device"] == "cpu"
    by_dtype = {f["evidence"]["dtype"]: f for f in data["findings"]}
    bf16 = by_dtype["bf16"]
    assert bf16["code"] == "precision_mismatch"
    assert bf16["module"] == "center"  # the cancellation, not the projection before it
    assert bf16["severity"] == "error"
    assert bf16["evidence"]["output_rel_error"] > 0.5
    assert bf16["evidence"]["previous_module"] == "proj"
    assert bf16["evidence"]["previous_output_rel_error"] < 0.05
    results = {r["dtype"]: r for r in data["results"]}
    assert results["bf16"]["first_output_beyond"] == "center"
    modules = {m["module"]: m for m in results["bf16"]["modules"]}
    assert modules["proj"]["beyond_tolerance"] is True  # its gradient suffers downstream
    assert modules["proj"]["output_rel_error"] < 0.01
    # fp16 autocast works on CPU in this torch, and the same op is flagged with its own tolerance
    if "fp16" in data["unsupported"]:
        assert "fp16" not in by_dtype
    else:
        assert by_dtype["fp16"]["module"] == "center"
        assert results["fp16"]["rtol"] == 0.01
    assert "precision_mismatch (center)" in result.content[0].text


@pytest.mark.anyio
async def test_healthy_model_has_no_precision_findings(workspace: Path) -> None:
    result = await _compare(workspace, {"entrypoint": "bf16_sensitive.py:healthy", "dtypes": ["bf16"]})
    assert not result.is_error, result.content[0].text
    data = result.structured_content
    assert data["findings"] == [] and data["healthy"] is True
    [bf16] = data["results"]
    assert bf16["dtype"] == "bf16" and bf16["first_output_beyond"] is None
    assert 0 < bf16["loss_rel_error"] < 0.05
    assert {m["module"] for m in bf16["modules"]} >= {"0", "1", "2", "<model>"}


@pytest.mark.anyio
async def test_tolerance_is_honoured_and_contract_errors_are_explained(workspace: Path) -> None:
    (workspace / "broken.py").write_text("def entry():\n    return {'batch': 1}\n")
    result = await _compare(
        workspace, {"entrypoint": "bf16_sensitive.py:entry", "dtypes": ["bf16"], "rtol_bf16": 5.0}
    )
    assert not result.is_error, result.content[0].text
    assert result.structured_content["findings"] == []
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        r = await client.call_tool("compare_precision", {"entrypoint": "broken.py:entry"})
        assert r.is_error
        assert "'model'" in r.content[0].text and "Next step" in r.content[0].text
        r = await client.call_tool("compare_precision", {"entrypoint": "broken.py:entry", "dtypes": ["fp8"]})
        assert r.is_error


BETWEEN_MODULES = """\
import torch
from torch import nn


class Motion(nn.Module):
    def __init__(self, subtract_first):
        super().__init__()
        self.subtract_first = subtract_first
        self.position = nn.Linear(2, 32)
        self.head = nn.Sequential(nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 2))

    def forward(self, prev, cur):
        if self.subtract_first:
            return self.head(self.position(cur - prev))
        return self.head(self.position(cur) - self.position(prev))  # the bf16 outputs cancel


def make(subtract_first=False):
    torch.manual_seed(0)
    start = 2000 + 4000 * torch.rand(64, 2)
    velocity = 6 * torch.rand(64, 2) - 3
    batch = {"prev": start, "cur": start + velocity, "vel": velocity}

    def loss_fn(m, b):
        return nn.functional.mse_loss(m(b["prev"], b["cur"]).float(), b["vel"])

    return {"model": Motion(subtract_first), "batch": batch, "loss_fn": loss_fn}


def fixed():
    return make(subtract_first=True)
"""


@pytest.mark.anyio
async def test_error_made_between_modules_is_placed_in_the_parents_forward(workspace: Path) -> None:
    """The agent benchmark's bf16_motion: `position(cur) - position(prev)` cancels in bf16. Every module's
    own output is within tolerance until the head, whose input is already wrong: the finding names the
    forward the subtraction is in and the measured cancellation, not the head (which would be blamed
    by module outputs alone)."""
    (workspace / "motion.py").write_text(BETWEEN_MODULES)
    result = await _compare(workspace, {"entrypoint": "motion.py:make", "dtypes": ["bf16"]})
    assert not result.is_error, result.content[0].text
    (f,) = result.structured_content["findings"]
    assert f["code"] == "precision_mismatch" and f["severity"] == "error"
    assert f["module"] == "<model>"
    ev = f["evidence"]
    assert ev["arises_in"] == "<model>" and ev["first_affected_module"] == "head.0"
    assert ev["previous_module"] == "position" and ev["previous_output_rel_error"] < 0.05
    assert ev["input_rel_error"] > 0.5 and ev["cancellation"] is True
    assert ev["previous_output_norm_fp32"] > 100 * ev["input_norm_fp32"]
    assert "Motion.forward (`<model>`)" in f["message"] and "not by head.0" in f["message"]
    healthy = await _compare(workspace, {"entrypoint": "motion.py:fixed", "dtypes": ["bf16"]})
    assert healthy.structured_content["findings"] == [], healthy.content[0].text

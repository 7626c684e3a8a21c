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


@pytest.mark.anyio
async def test_precision_lost_in_forward_code_between_modules_is_told_apart(workspace: Path) -> None:
    """A subtraction that is no module (found in the blind agent benchmark: the tool blamed the head that
    only inherited the damage, and keeping the head in fp32 did not help)."""
    result = await _compare(
        workspace, {"entrypoint": "bf16_sensitive.py:between_modules", "dtypes": ["bf16"]}
    )
    assert not result.is_error, result.content[0].text
    [bf16] = result.structured_content["findings"]
    assert bf16["module"] == "head.0" and bf16["evidence"]["lost_between_modules"] is True
    assert bf16["evidence"]["previous_module"] == "position"
    assert bf16["evidence"]["previous_output_rel_error"] < 0.05 < bf16["evidence"]["input_rel_error"]
    assert "INPUT of head.0" in bf16["message"] and "between modules" in bf16["message"]
    # where the module itself loses the precision, the message says so and not "between modules"
    center = await _compare(workspace, {"entrypoint": "bf16_sensitive.py:entry", "dtypes": ["bf16"]})
    [f] = center.structured_content["findings"]
    assert f["module"] == "center" and f["evidence"]["lost_between_modules"] is False

"""The real BLOOM training logs (../shared/realworld/bloom), analysed through the MCP server
the way an assistant calls it: the logs are copied into the server's workspace first."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig

BLOOM = Path(__file__).resolve().parents[1].parent / "shared" / "realworld" / "bloom"


@pytest.fixture
def bloom_ws(workspace: Path) -> Path:
    assert BLOOM.is_dir(), f"the real logs are missing: {BLOOM}"
    dest = workspace / "logs"
    shutil.copytree(BLOOM, dest)
    return workspace


async def _analyze(ws: Path, name: str, **extra: Any) -> dict[str, Any]:
    server, _ = build_server(ServerConfig(workspaces=[ws]))
    async with Client(server) as client:
        result = await client.call_tool("analyze_training_log", {"path": f"logs/{name}", **extra})
        assert not result.is_error, result.content[0].text
        assert result.structured_content is not None
        return result.structured_content


def _codes(out: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["code"], e["severity"]) for e in out["events"]]


@pytest.mark.anyio
async def test_bloom_176b_spike_is_a_recovered_loss_spike_led_by_grad_norm(bloom_ws: Path) -> None:
    out = await _analyze(bloom_ws, "tr11-176B-ml.log")
    events = out["events"]
    assert "divergence" not in {e["code"] for e in events}
    spike = next(e for e in events if e["code"] == "loss_spike")
    assert spike["step"] == 31219 and spike["metric"] == "lm loss" and spike["severity"] == "warning"
    assert spike["evidence"]["peak"] == pytest.approx(5.098124, rel=1e-5)
    assert spike["evidence"]["recovered_step"] == 31250
    grad = next(e for e in events if e["code"] == "grad_norm_spike")
    assert grad["metric"] == "grad norm"
    assert 31214 < grad["step"] < 31219  # the grad norm rises before the loss jumps
    assert grad["evidence"]["leads_loss_spike_by"] == 31219 - grad["step"] >= 1
    assert grad["evidence"]["peak"] == pytest.approx(960.351)
    assert grad["failure_modes"] == spike["failure_modes"] or isinstance(grad["failure_modes"], list)
    assert not out["healthy"]


@pytest.mark.anyio
async def test_bloom_104b_tr8b_divergence_loss_scale_collapse_and_skips(bloom_ws: Path) -> None:
    out = await _analyze(bloom_ws, "tr8b-104B.log")
    by_code = {e["code"]: e for e in out["events"]}
    div = by_code["divergence"]
    assert div["step"] == 17062 and div["severity"] == "error" and div["metric"] == "lm loss"
    collapse = by_code["loss_scale_collapse"]
    assert collapse["evidence"]["start_scale"] == 1048576 and collapse["evidence"]["end_scale"] == 32768
    assert 17062 <= collapse["step"] <= 17063
    skipped = by_code["skipped_steps"]
    assert skipped["severity"] == "warning"
    assert {17063, 17064, 17065} <= set(skipped["evidence"]["steps"])
    assert "loss_spike" not in by_code


@pytest.mark.anyio
async def test_bloom_104b_wide_instability(bloom_ws: Path) -> None:
    out = await _analyze(bloom_ws, "tr8-104B-wide.log")
    codes = _codes(out)
    spikes = [e for e in out["events"] if e["code"] == "loss_spike"]
    assert {s["step"] for s in spikes} >= {8741, 11448}
    assert ("grad_norm_spike", "warning") in codes
    assert ("loss_scale_collapse", "warning") in codes
    # records from different restarts arrive out of order: read as segments, not garbage
    assert len(out["segments"]) == 3
    assert any("segments" in n for n in out["notes"])
    assert out["roles"]["val_loss"] == ["validation lm loss value"]


@pytest.mark.anyio
async def test_bloom_13b_jump_and_frozen_grad_norm(bloom_ws: Path) -> None:
    out = await _analyze(bloom_ws, "tr1-13B-base.log")
    by_code = {e["code"]: e for e in out["events"]}
    assert by_code["loss_spike"]["step"] == 29050
    assert (
        by_code["constant_metric"]["metric"] == "grad norm"
        and by_code["constant_metric"]["evidence"]["value"] == 0
    )


@pytest.mark.anyio
async def test_bloom_plot_is_returned_as_image_content(bloom_ws: Path) -> None:
    server, _ = build_server(ServerConfig(workspaces=[bloom_ws]))
    async with Client(server) as client:
        result = await client.call_tool(
            "analyze_training_log", {"path": "logs/tr11-176B-ml.log", "plot": True}
        )
        assert not result.is_error
        images = [c for c in result.content if c.type == "image"]
        assert len(images) == 1 and images[0].mime_type == "image/png"
        import base64

        assert base64.b64decode(images[0].data).startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.anyio
async def test_pagination_min_severity_and_extract_over_mcp(bloom_ws: Path) -> None:
    server, _ = build_server(ServerConfig(workspaces=[bloom_ws]))
    async with Client(server) as client:
        first = await client.call_tool("analyze_training_log", {"path": "logs/tr8b-104B.log", "limit": 1})
        sc = first.structured_content
        assert sc is not None and len(sc["events"]) == 1 and sc["total_events"] > 1 and sc["next_cursor"]
        second = await client.call_tool(
            "analyze_training_log", {"path": "logs/tr8b-104B.log", "limit": 1, "cursor": sc["next_cursor"]}
        )
        assert second.structured_content["events"][0] != sc["events"][0]  # type: ignore[index]
        errors_only = await client.call_tool(
            "analyze_training_log", {"path": "logs/tr8b-104B.log", "min_severity": "error"}
        )
        assert {e["severity"] for e in errors_only.structured_content["events"]} == {"error"}  # type: ignore[index]
        ex = await client.call_tool(
            "extract_metrics",
            {"path": "logs/tr11-176B-ml.log", "metrics": ["loss", "grad norm"], "max_points": 6},
        )
        assert not ex.is_error
        series = {s["name"]: s for s in ex.structured_content["series"]}  # type: ignore[index]
        assert set(series) == {"lm loss", "grad norm"}
        assert len(series["grad norm"]["values"]) <= 6 and max(
            series["grad norm"]["values"]
        ) == pytest.approx(960.351)


@pytest.mark.anyio
async def test_analysis_is_stored_as_evidence_on_an_investigation(bloom_ws: Path) -> None:
    server, _ = build_server(ServerConfig(workspaces=[bloom_ws]))
    async with Client(server) as client:
        started = await client.call_tool(
            "start_investigation", {"symptom": "the loss spiked at 31219 and recovered"}
        )
        assert not started.is_error, started.content[0].text  # type: ignore[union-attr]
        inv = started.structured_content["investigation_id"]  # type: ignore[index]
        result = await client.call_tool(
            "analyze_training_log", {"path": "logs/tr11-176B-ml.log", "investigation_id": inv}
        )
        assert not result.is_error
        assert result.structured_content is not None and result.structured_content["evidence_id"]

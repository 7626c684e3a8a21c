"""The server as clients see it: tool list, annotations, instructions, confinement, over memory and stdio."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp_types import ToolAnnotations

from trainsleuth.server.app import INSTRUCTIONS, build_server
from trainsleuth.server.context import ServerConfig

SPEC_TOOLS = {
    "start_investigation", "get_investigation", "list_investigations", "record_evidence",
    "propose_hypotheses", "resolve_hypothesis", "submit_diagnosis", "approve_diagnosis",
    "record_review", "begin_fix", "verify_fix", "capture_knowledge",
    "probe_gradients", "read_probe_run", "compare_precision", "check_distributed",
    "dump_stacks", "analyze_training_log", "extract_metrics", "diff_checkpoints",
    "environment_report", "bisect_commits", "bisect_versions", "get_job", "cancel_job",
    "search_literature", "lookup_constraints",
}  # fmt: skip

ANALYSIS_TOOLS = {
    "probe_gradients", "read_probe_run", "compare_precision", "check_distributed", "dump_stacks",
    "analyze_training_log", "extract_metrics", "diff_checkpoints", "environment_report",
    "bisect_commits", "bisect_versions", "search_literature", "lookup_constraints",
}  # fmt: skip

TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")


def stdio_params(workspace: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=TRAINSLEUTH,
        args=["serve", "--workspace", str(workspace)],
        cwd=str(workspace),
        env=dict(os.environ),
    )


# The MCP defaults of the hints; tools/list leaves out a hint equal to its default.
HINT_DEFAULTS = {
    "read_only_hint": False,
    "destructive_hint": True,
    "idempotent_hint": False,
    "open_world_hint": True,
}
RUNS_USER_CODE = {
    "probe_gradients", "check_distributed", "compare_precision", "diff_checkpoints", "bisect_commits",
    "bisect_versions", "verify_fix",
}  # fmt: skip
REACHES_NETWORK = {"search_literature", "bisect_versions", "bisect_commits"}


@pytest.mark.anyio
async def test_every_spec_tool_is_listed_with_honest_annotations(workspace: Path) -> None:
    server, registry = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) >= SPEC_TOOLS
        for tool in tools.values():
            ann = tool.annotations or ToolAnnotations()  # none at all: every hint is its default
            chosen = registry.tools[tool.name].hints
            assert set(chosen) == set(HINT_DEFAULTS), tool.name
            for hint, default in HINT_DEFAULTS.items():
                published = getattr(ann, hint)
                if chosen["read_only_hint"] and hint in ("destructive_hint", "idempotent_hint"):
                    assert published is None, (tool.name, hint)  # meaningless for a read-only tool (spec)
                    continue
                # Published only where it differs from the default; the effective value is the chosen one.
                assert (published if published is not None else default) == chosen[hint], (tool.name, hint)
                assert published is None or published != default, (tool.name, hint)
            assert tool.output_schema is None, tool.name
            assert tool.description and len(tool.description) <= 120, tool.name
            effective = {h: chosen[h] for h in HINT_DEFAULTS}
            if tool.name in RUNS_USER_CODE:
                assert effective["destructive_hint"] and not effective["read_only_hint"], tool.name
            assert effective["open_world_hint"] == (tool.name in REACHES_NETWORK), tool.name
            if "investigation_id" in tool.input_schema["properties"] and tool.name in ANALYSIS_TOOLS:
                # Recording evidence writes state: no analysis tool may claim to be read-only.
                assert not effective["read_only_hint"], tool.name
        for name in ANALYSIS_TOOLS:
            assert "investigation_id" in tools[name].input_schema["properties"], name
        assert client.instructions == INSTRUCTIONS
        assert "verify_fix" in INSTRUCTIONS and "three failed" in INSTRUCTIONS.lower()


@pytest.mark.anyio
async def test_confinement_refusals_are_error_results(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.log").write_text("loss 1\n")
    (outside / "train.py").write_text("def make():\n    return {}\n")
    (workspace / "escape").symlink_to(outside)
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        # Paths a tool writes in or runs code from must lie inside the workspace.
        cases = {
            "../outside/train.py:make": "outside the workspace",
            "escape/train.py:make": "symlink",
            f"{outside / 'train.py'}:make": "outside the workspace",
        }
        for entry, why in cases.items():
            result = await client.call_tool("probe_gradients", {"entrypoint": entry})
            assert result.is_error, entry
            text = result.content[0].text
            assert "Refused by workspace policy" in text and why in text, (entry, text)
            # The refusal says which --workspace would allow it.
            assert f"--workspace {outside}" in text, text
        result = await client.call_tool("analyze_training_log", {"path": "a\x00b"})
        assert result.is_error and "null byte" in result.content[0].text
        result = await client.call_tool(
            "bisect_commits", {"repo": ".", "good": "--upload-pack=evil", "bad": "HEAD", "command": "true"}
        )
        assert result.is_error
        assert "begins with '-'" in result.content[0].text
        result = await client.call_tool(
            "bisect_commits", {"repo": str(outside), "good": "a", "bad": "b", "command": "true"}
        )
        assert result.is_error and "outside the workspace" in result.content[0].text


@pytest.mark.anyio
async def test_stdio_transport_lists_tools_and_refuses_escapes(workspace: Path) -> None:
    async with Client(stdio_params(workspace)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names >= SPEC_TOOLS
        result = await client.call_tool("analyze_training_log", {"path": "../../etc/passwd"})
        assert result.is_error and "outside the workspace" in result.content[0].text


def test_stdout_carries_only_protocol(workspace: Path) -> None:
    """Logs go to stderr: a bad request must not put anything but JSON-RPC on stdout."""
    import subprocess

    init = (
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        '"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n'
        "this is not json\n"
    )
    proc = subprocess.run(
        [TRAINSLEUTH, "serve", "-v", "--workspace", str(workspace)],
        input=init,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines, proc.stderr
    assert all(re.match(r'^\{"jsonrpc":\s*"2.0"', line) for line in lines), proc.stdout


def test_serve_rejects_missing_workspace(tmp_path: Path) -> None:
    import subprocess

    proc = subprocess.run(
        [TRAINSLEUTH, "serve", "--workspace", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "not an existing directory" in proc.stderr


@pytest.mark.anyio
async def test_analysis_results_become_evidence(workspace: Path) -> None:
    (workspace / "train.log").write_text(
        "".join(f"step {i} | loss {2.0 - i * 0.01:.3f}\n" for i in range(50))
    )
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        unknown = await client.call_tool(
            "analyze_training_log", {"path": "train.log", "investigation_id": "nope"}
        )
        assert unknown.is_error and "does not exist" in unknown.content[0].text
        assert "start_investigation" in unknown.content[0].text
        started = await client.call_tool(
            "start_investigation",
            {
                "symptom": "loss does not go down",
                "expected": "loss falls",
                "observed": "flat loss",
                "reproducer": "python train.py",
            },
        )
        assert not started.is_error, started.content[0].text
        inv = started.structured_content["investigation_id"]
        result = await client.call_tool(
            "analyze_training_log", {"path": "train.log", "investigation_id": inv}
        )
        assert not result.is_error, result.content[0].text
        ev = result.structured_content["evidence_id"]
        assert ev and f"Stored as evidence {ev}." in result.content[0].text
        timeline = await client.call_tool("get_investigation", {"investigation_id": inv})
        assert ev in json.dumps(timeline.structured_content)


@pytest.mark.anyio
async def test_unusable_state_store_is_a_clear_error(workspace: Path) -> None:
    (workspace / "afile").write_text("not a folder")
    server, _ = build_server(
        ServerConfig(workspaces=[workspace], state_path=workspace / "afile" / "state.db")
    )
    async with Client(server) as client:
        result = await client.call_tool("list_investigations", {})
        assert result.is_error
        assert "state store is unavailable" in result.content[0].text and "--state" in result.content[0].text

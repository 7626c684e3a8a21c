"""The surface through real clients: standard JSON-RPC errors for unknown prompts and resources
(stdio and HTTP), results bounded in both channels with the whole result behind a resource link,
read-only inputs outside the workspace, and the `trainsleuth client` commands that describe tools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig

TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")
INVALID_PARAMS = -32602


def stdio(workspace: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=TRAINSLEUTH,
        args=["serve", "--workspace", str(workspace)],
        cwd=str(workspace),
        env=dict(os.environ),
    )


async def _expect_invalid_params(coro, *words: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MCPError) as info:
        await coro
    assert info.value.error.code == INVALID_PARAMS, info.value.error
    for word in words:
        assert word in info.value.error.message, info.value.error.message


async def _error_codes(client: Client) -> None:
    await _expect_invalid_params(
        client.get_prompt("critical_reveiw", {}), "Unknown prompt", "critical_review"
    )
    await _expect_invalid_params(
        client.get_prompt("critical_review", {}), "missing required: investigation_id"
    )
    await _expect_invalid_params(
        client.get_prompt("debug_protocol", {"topic": "x"}), "topic: unknown argument"
    )
    await _expect_invalid_params(client.read_resource("failure-mode://no-such-mode"), "no failure mode")
    await _expect_invalid_params(client.read_resource("checklist://no-such-list"), "no checklist")
    await _expect_invalid_params(client.read_resource("result://nope.json"), "no stored result")
    await _expect_invalid_params(client.read_resource("nothing://here"), "Unknown resource")
    prompt = await client.get_prompt("debug_protocol", {})
    assert prompt.messages


@pytest.mark.anyio
async def test_unknown_prompts_and_resources_are_invalid_params_over_stdio(workspace: Path) -> None:
    async with Client(stdio(workspace)) as client:
        await _error_codes(client)


@pytest.mark.anyio
async def test_unknown_prompts_and_resources_are_invalid_params_over_http(workspace: Path) -> None:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from tests.test_surface_jobs import http_server

    with http_server(workspace, "tok", {}) as port:
        http = create_mcp_http_client(headers={"Authorization": "Bearer tok"})
        async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client:
            await _error_codes(client)


def _train_log(path: Path, steps: int) -> None:
    """A real (tiny) training run: SGD on a noisy linear regression, logged every step."""
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 8))
    w_true = rng.normal(size=8)
    y = x @ w_true + 0.1 * rng.normal(size=256)
    w = np.zeros(8)
    lines = []
    for step in range(1, steps + 1):
        idx = rng.integers(0, 256, size=32)
        err = x[idx] @ w - y[idx]
        grad = x[idx].T @ err / 32
        w -= 0.01 * grad
        lines.append(
            json.dumps(
                {
                    "step": step,
                    "loss": float((err**2).mean()),
                    "grad_norm": float(np.linalg.norm(grad)),
                    "lr": 0.01,
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.anyio
async def test_large_results_are_bounded_and_the_whole_is_a_resource(workspace: Path) -> None:
    """extract_metrics with max_points=5000 answered 201,000 characters of structuredContent;
    both channels now stay <= 20,000 and the whole series sits behind a resource link."""
    _train_log(workspace / "metrics.jsonl", 6000)
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        result = await client.call_tool(
            "extract_metrics",
            {"path": "metrics.jsonl", "metrics": ["loss", "grad_norm", "lr"], "max_points": 5000},
        )
        assert not result.is_error, result.content[0].text
        structured = result.structured_content
        assert structured is not None
        assert len(json.dumps(structured)) <= 20_000
        assert all(len(c.text) <= 20_000 for c in result.content if c.type == "text")
        full = structured["full_result"]
        assert full["characters"] > 20_000 and full["cut"]
        links = [c for c in result.content if c.type == "resource_link"]
        assert [str(link.uri) for link in links] == [full["uri"]]
        assert full["path"] in result.content[0].text
        # The whole result: every point of every series, through MCP and on disk in the workspace.
        read = await client.read_resource(full["uri"])
        whole = json.loads(read.contents[0].text)
        assert Path(full["path"]).is_relative_to(workspace.resolve() / ".trainsleuth")
        assert json.loads(Path(full["path"]).read_text()) == whole
        assert {s["name"] for s in whole["series"]} >= {"loss", "grad_norm"}
        assert all(len(s["values"]) > 2500 for s in whole["series"] if s["name"] in ("loss", "grad_norm"))
        # The summary stays inline: the text still lists each series with its range.
        assert "loss" in result.content[0].text and "min " in result.content[0].text


@pytest.mark.anyio
async def test_inputs_read_outside_the_workspace_are_allowed_read_only(
    workspace: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "runs"
    elsewhere.mkdir()
    _train_log(elsewhere / "train.jsonl", 200)
    async with Client(stdio(workspace)) as client:
        ok = await client.call_tool("analyze_training_log", {"path": str(elsewhere / "train.jsonl")})
        assert not ok.is_error, ok.content[0].text
        assert (
            f"Read-only input outside the workspace: path={elsewhere / 'train.jsonl'}" in ok.content[0].text
        )
        assert not list(elsewhere.glob(".trainsleuth*"))  # nothing written there
        # Places where credentials and system state live stay refused, and the refusal says what would allow it.
        for secret, why in (("/etc/hostname", "under /etc"), ("/proc/self/environ", "under /proc")):
            refused = await client.call_tool("analyze_training_log", {"path": secret})
            assert refused.is_error and why in refused.content[0].text, refused.content[0].text
        (elsewhere / ".env").write_text("TOKEN=x\n")
        refused = await client.call_tool("analyze_training_log", {"path": str(elsewhere / ".env")})
        assert refused.is_error and "secrets file" in refused.content[0].text
        assert f"--workspace {elsewhere}" in refused.content[0].text


def run_cli(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TRAINSLEUTH, *args], capture_output=True, text=True, timeout=120, cwd=cwd, input=stdin, check=False
    )


def test_client_tools_json_and_describe(workspace: Path) -> None:
    listed = run_cli("client", "tools", "--json", cwd=workspace)
    assert listed.returncode == 0, listed.stderr
    tools = {t["name"]: t for t in json.loads(listed.stdout)}
    assert tools["bisect_versions"]["inputSchema"]["required"] == ["command", "package", "versions"]
    # destructiveHint is left out where it is the MCP default (true): the probe runs the user's code.
    assert tools["probe_gradients"]["annotations"].get("destructiveHint", True) is True
    assert tools["get_investigation"]["annotations"]["readOnlyHint"] is True
    card = run_cli("client", "describe", "bisect_versions", cwd=workspace)
    assert card.returncode == 0, card.stderr
    assert "* versions" in card.stdout and "list of string (>= 2 items)" in card.stdout
    assert 'one of "skip", "bad"; default "skip"' in card.stdout
    assert "trainsleuth client call bisect_versions --arg" in card.stdout
    as_json = json.loads(
        run_cli("client", "describe", "analyze_training_log", "--json", cwd=workspace).stdout
    )
    assert as_json["example_arguments"] == {"path": "train.log"}
    wrong = run_cli("client", "describe", "analyse_training_log", cwd=workspace)
    assert wrong.returncode == 2 and "did you mean 'analyze_training_log'" in wrong.stderr


def test_output_piped_to_a_closed_reader_stops_quietly(workspace: Path) -> None:
    """`trainsleuth ... | head -1`: no BrokenPipeError traceback."""
    proc = subprocess.run(
        f"{TRAINSLEUTH} client describe bisect_versions | head -1",
        shell=True, capture_output=True, text=True, timeout=120, cwd=workspace,
    )  # fmt: skip
    assert proc.stdout.startswith("bisect_versions:")
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


def test_fail_on_means_the_same_in_every_subcommand() -> None:
    from trainsleuth.cli import build_parser

    parser = build_parser()
    choices = {}
    for path in (["logs", "analyze", "x"], ["probe", "x:y"], ["client", "call", "t"]):
        for level in ("info", "warning", "error", "never"):
            args = parser.parse_args([*path, "--fail-on", level])
            assert args.fail_on == level
        choices[" ".join(path[:-1])] = parser.parse_args(path).fail_on
    assert set(choices.values()) == {"never"}, choices


def test_the_inspector_sees_a_small_list_and_gets_named_argument_errors(
    workspace: Path, tmp_path: Path
) -> None:
    """The MCP Inspector CLI (a client nobody here wrote): the tool list it receives is within budget
    and self-contained, and a misnamed argument comes back as isError naming the right one."""
    from tests.test_e2e_inspector import REPO, inspector, npm_tools_installed

    home = tmp_path / "home"
    home.mkdir()
    listed = inspector(workspace, home, "--method", "tools/list")
    text = json.dumps(listed["tools"], separators=(",", ":"))
    assert len(text) <= 20_000 and "$ref" not in text
    npm_tools_installed()
    proc = subprocess.run(
        ["npx", "--no-install", "@modelcontextprotocol/inspector", "--cli", TRAINSLEUTH, "serve", "--workspace",
         str(workspace), "--method", "tools/call", "--tool-name", "extract_metrics", "--tool-arg", "path=x.log",
         "--tool-arg", "max_point=10"],
        cwd=REPO, env={**os.environ, "HOME": str(home), "NO_COLOR": "1"}, capture_output=True, text=True,
        timeout=240,
    )  # fmt: skip
    # The Inspector exits 5 for an isError result and prints the result first.
    assert proc.returncode == 5, proc.stdout + proc.stderr
    called = json.JSONDecoder().raw_decode(proc.stdout.lstrip())[0]
    assert called["isError"] is True
    assert "max_point (did you mean 'max_points'?)" in called["content"][0]["text"]


@pytest.mark.anyio
async def test_outside_reads_can_be_turned_off(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "train.log").write_text("step 1 | loss 2.0\nstep 2 | loss 1.9\n")
    monkeypatch.setenv("TRAINSLEUTH_OUTSIDE_READS", "0")
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        refused = await client.call_tool("analyze_training_log", {"path": str(tmp_path / "train.log")})
    assert refused.is_error and "outside the workspace" in refused.content[0].text
    assert f"--workspace {tmp_path}" in refused.content[0].text

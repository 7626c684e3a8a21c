"""compare_runs and check_resume through a real MCP client (in memory), the CLI in a subprocess,
and the road from a divergence to a bisect: a real git history whose training script changed its
schedule, two real runs, the offered reproducer, and bisect_commits finding the commit with it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "tests" / "data" / "compare" / "runs"


@pytest.fixture
def ws(workspace: Path) -> Path:
    shutil.copytree(RUNS, workspace / "runs")
    shutil.copytree(ROOT / "examples" / "resume", workspace / "resume")
    return workspace


async def _start(client: Client, symptom: str) -> str:
    r = await client.call_tool("start_investigation", {"symptom": symptom, "reproducible": "always"})
    assert not r.is_error, r.content[0].text
    return str(r.structured_content["investigation_id"])


@pytest.mark.anyio
async def test_compare_runs_records_evidence_and_attaches_the_plot(ws: Path) -> None:
    server, registry = build_server(ServerConfig(workspaces=[ws]))
    assert {"compare_runs", "check_resume"}.isdisjoint(registry.placeholders)
    async with Client(server) as client:
        inv = await _start(client, "the loss curve differs from last week's run")
        r = await client.call_tool(
            "compare_runs", {"good": "runs/base_s0", "bad": "runs/lr_const", "investigation_id": inv}
        )
        assert not r.is_error, r.content[0].text
        data = r.structured_content
        assert data["verdict"] == "diverged" and data["order"][0] == "lr@1"
        assert data["evidence_id"] and data["differences"][0]["item"] in ("lr_schedule", "warmup_steps")
        assert data["findings"][0]["code"] == "run_divergence"
        text = r.content[0].text
        assert text.startswith("compare_runs: diverged.") and "Differences, most likely cause first" in text
        assert any(c.type == "image" for c in r.content)
        seed = await client.call_tool(
            "compare_runs", {"good": "runs/base_s0", "bad": "runs/base_s1", "plot": False}
        )
        assert seed.structured_content["verdict"] == "within_noise"
        assert not any(c.type == "image" for c in seed.content)
        got = await client.call_tool("get_investigation", {"investigation_id": inv})
        assert "compare_runs" in got.content[0].text


@pytest.mark.anyio
async def test_compare_runs_refuses_clearly(ws: Path, tmp_path: Path) -> None:
    server, _ = build_server(ServerConfig(workspaces=[ws]))
    async with Client(server) as client:
        missing = await client.call_tool("compare_runs", {"good": "runs/nope", "bad": "runs/base_s1"})
        assert missing.is_error and "runs/nope" in missing.content[0].text
        # a run outside the workspace is read (read-only), and says so when it holds no log
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        outside = await client.call_tool("compare_runs", {"good": str(elsewhere), "bad": "runs/base_s1"})
        assert outside.is_error and "holds no training log" in outside.content[0].text
        private = await client.call_tool("compare_runs", {"good": "/etc", "bad": "runs/base_s1"})
        assert private.is_error and "workspace" in private.content[0].text
        one_ref = await client.call_tool(
            "compare_runs", {"good": "runs/base_s0", "bad": "runs/lr_const", "good_ref": "HEAD~1"}
        )
        assert one_ref.is_error and "both good_ref and bad_ref" in one_ref.content[0].text
        not_git = await client.call_tool(
            "compare_runs",
            {"good": "runs/base_s0", "bad": "runs/lr_const", "good_ref": "v1", "bad_ref": "v2"},
        )
        assert not_git.is_error and "not a commit" in not_git.content[0].text
        empty = ws / "empty"
        empty.mkdir()
        nolog = await client.call_tool("compare_runs", {"good": "runs/base_s0", "bad": "empty"})
        assert nolog.is_error and "holds no training log" in nolog.content[0].text


@pytest.mark.anyio
async def test_check_resume_through_mcp(ws: Path) -> None:
    server, _ = build_server(ServerConfig(workspaces=[ws]))
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with Client(server) as client:
        inv = await _start(client, "after resuming, the learning rate starts over")
        r = await client.call_tool(
            "check_resume",
            {"entrypoint": "resume/resume_cases.py:no_scheduler", "investigation_id": inv, "steps_after": 2},
            progress_callback=on_progress,
        )
        assert not r.is_error, r.content[0].text
        data = r.structured_content
        assert data["verdict"] == "not_restored" and data["healthy"] is False
        assert [n["piece"] for n in data["not_restored"]] == ["LR scheduler step"]
        assert data["evidence_id"] and "not restored: LR scheduler step" in r.content[0].text
        assert progress and progress[0].startswith("training 6 steps with a save after step 4")
        bad = await client.call_tool("check_resume", {"entrypoint": "resume/missing.py:make"})
        assert bad.is_error and "does not exist" in bad.content[0].text


TRAIN = """\
import argparse
import json
import math

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--log", required=True)
args = parser.parse_args()
torch.manual_seed(0)
x = torch.randn(64, 4)
y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
WARMUP = {warmup}
with open(args.log, "w") as fh:
    for step in range(1, 31):
        lr = 0.05 * min(1.0, step / WARMUP) if WARMUP else 0.05
        lr *= 0.5 * (1 + math.cos(math.pi * step / 30))
        for g in opt.param_groups:
            g["lr"] = lr
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        fh.write(json.dumps({{"step": step, "loss": loss.item(), "lr": lr}}) + "\\n")
"""


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.mark.anyio
async def test_from_divergence_to_the_commit(workspace: Path) -> None:
    repo = workspace / "proj"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / ".gitignore").write_text("runs/\n")
    (repo / "train.py").write_text(TRAIN.format(warmup=5))
    good = _commit(repo, "train with warmup")
    (repo / "README.md").write_text("a tiny regression\n")
    _commit(repo, "readme")
    (repo / "train.py").write_text(TRAIN.format(warmup=0))
    culprit = _commit(repo, "simplify the schedule")
    (repo / "NOTES.md").write_text("next: a bigger model\n")
    _commit(repo, "notes")
    for name, ref in (("good", good), ("bad", "HEAD")):
        (repo / "runs" / name).mkdir(parents=True)
        script = repo / "runs" / name / "train.py"
        script.write_text(_git(repo, "show", f"{ref}:train.py"))
        subprocess.run([sys.executable, str(script), "--log", str(repo / "runs" / name / "metrics.jsonl")],
                       check=True, cwd=repo, timeout=300)  # fmt: skip
    status_before = _git(repo, "status", "--porcelain")
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        r = await client.call_tool(
            "compare_runs",
            {
                "good": "proj/runs/good/metrics.jsonl",
                "bad": "proj/runs/bad/metrics.jsonl",
                "good_ref": good,
                "bad_ref": "HEAD",
                "train_command": f"{sys.executable} train.py --log {{log}}",
                "plot": False,
            },
        )
        assert not r.is_error, r.content[0].text
        data = r.structured_content
        assert data["verdict"] == "diverged" and data["order"][0] == "lr@1"
        offer = data["bisect"]
        assert offer["tool"] == "bisect_commits" and "approve" in offer["approval"]
        reproducer = Path(offer["reproducer"])
        assert reproducer.is_relative_to(workspace / ".trainsleuth" / "scratch")
        assert (workspace / ".trainsleuth" / ".gitignore").exists()
        assert offer["arguments"]["repo"] == str(repo) and offer["arguments"]["good"] == good
        # the person approves; the assistant makes exactly the offered call
        b = await client.call_tool("bisect_commits", offer["arguments"])
        assert not b.is_error, b.content[0].text
        result = b.structured_content
        while result["status"] == "running":  # a long call hands back its job id after ~40 s
            got = await client.call_tool("get_job", {"job_id": result["job_id"], "wait_s": 40})
            assert not got.is_error, got.content[0].text
            result = {**got.structured_content.get("result", {}), "status": got.structured_content["status"]}
        assert result["status"] == "succeeded", result
        assert result["first_bad_commit"]["hash"] == culprit
    assert _git(repo, "status", "--porcelain") == status_before


def test_cli_compare_and_resume_check(ws: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "trainsleuth", *args], cwd=ws, capture_output=True, text=True, timeout=600
        )

    ok = cli("compare", "runs/base_s0", "runs/base_s1", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["verdict"] == "within_noise"
    plot = ws / "both.png"
    diverged = cli("compare", "runs/base_s0", "runs/lr_const", "--fail-on-divergence", "--plot", str(plot))
    assert diverged.returncode == 1 and diverged.stdout.startswith("compare_runs: diverged.")
    assert plot.read_bytes().startswith(b"\x89PNG")
    missing = cli("compare", "runs/base_s0", "runs/nope")
    assert missing.returncode == 3 and "no such file" in missing.stderr
    usage = cli("compare", "runs/base_s0", "runs/lr_const", "--good-ref", "HEAD")
    assert usage.returncode == 2
    resumed = cli(
        "resume-check", "resume/resume_cases.py:no_ema", "--steps-before", "2", "--steps-after", "2"
    )
    assert resumed.returncode == 1, resumed.stderr
    assert "not restored: EMA weights" in resumed.stdout


@pytest.mark.anyio
async def test_descriptions_stay_within_the_tools_list_budget(ws: Path) -> None:
    server, _ = build_server(ServerConfig(workspaces=[ws]))
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ("compare_runs", "check_resume"):
        tool = tools[name]
        assert tool.description is not None
        assert len(tool.description) <= 400 and tool.description.count(". ") <= 2, tool.description
        assert tool.description.startswith("Comparing with what works")
        props = tool.input_schema["properties"]
        assert all(len(p.get("description", "")) <= 120 for p in props.values()), name
        assert len(json.dumps(props)) <= 2000, (name, len(json.dumps(props)))

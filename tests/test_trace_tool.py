"""trace_diff as the user meets it: through a real MCP client on a real git history (two revisions in
temporary worktrees, the checkout untouched), offered by bisect_commits on the pair it found, refusing
bad input with a clear message, and from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from trainsleuth.cli import main as cli_main
from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig

PY = Path(sys.executable)

TRAIN = """
import sys

import torch
from torch import nn


def build():
    return nn.Sequential(nn.Linear(4, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 1))


def main():
    torch.manual_seed(0)
    model = build()
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    x = torch.randn(128, 4)
    y = (x[:, :1] * 3 + x[:, 1:2]).tanh()
    model.train()
    for step in range(60):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    # The batch-norm statistics must have followed the data (they do not when training runs in eval mode).
    moved = (model[1].running_var - 1).abs().max().item()
    print("final loss", loss.item(), "running statistics moved by", moved)
    sys.exit(0 if loss.item() < 0.5 and moved > 1e-3 else 1)


main()
"""
# The bug (commit 4): a shape check puts the model in eval mode and it is never switched back.
BUGGY = TRAIN.replace(
    "    model.train()\n",
    "    model.train()\n    model.eval()  # check the output shape without dropout\n    assert model(x[:2]).shape == (2, 1)\n",
)


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.strip()


def _history(ws: Path) -> list[str]:
    """Six commits; the fourth puts the model in eval mode before training."""
    ws.mkdir(exist_ok=True)
    _git(ws, "init", "-q", "-b", "main")
    steps = [
        {"train.py": TRAIN, ".gitignore": "data/\n"},
        {"README.md": "# toy\n"},
        {"NOTES.md": "lr 2e-2 works\n"},
        {"train.py": BUGGY},
        {"README.md": "# toy\n\nTrains a small MLP.\n"},
        {"NOTES.md": "lr 2e-2 works; 60 steps\n"},
    ]
    commits = []
    for i, files in enumerate(steps):
        for name, text in files.items():
            (ws / name).write_text(textwrap.dedent(text).lstrip() if name.endswith(".py") else text)
        _git(ws, "add", "-A")
        _git(ws, "commit", "-qm", f"commit {i}")
        commits.append(_git(ws, "rev-parse", "HEAD"))
    return commits


def _state(ws: Path) -> tuple[str, str, str]:
    """What the user has: the status of the checkout, its worktrees, and the file contents."""
    status = "\n".join(
        line
        for line in _git(ws, "status", "--porcelain", "--ignored").splitlines()
        if ".trainsleuth/" not in line
    )  # trainsleuth's own folder (git-ignored by its own .gitignore) is expected
    worktrees = _git(ws, "worktree", "list", "--porcelain")
    files = "".join(
        sorted(
            f"{p}:{p.read_bytes()!r}"
            for p in ws.rglob("*")
            if p.is_file() and ".git" not in p.parts and ".trainsleuth" not in p.parts
        )
    )
    return status, worktrees, files


def _server(ws: Path) -> Any:
    server, _ = build_server(ServerConfig(workspaces=[ws], call_wait_s=900))
    return server


@pytest.mark.anyio
async def test_bisect_offers_trace_diff_on_the_pair_it_found_and_trace_diff_names_the_call(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "proj"
    commits = _history(ws)
    # The user is in the middle of something: an edit and data git ignores; neither may change.
    (ws / "README.md").write_text("# toy (editing)\n")
    (ws / "data").mkdir()
    (ws / "data" / "cache.txt").write_text("the user's data\n")
    before = _state(ws)
    async with Client(_server(ws)) as client:
        command = f"{PY} train.py"  # bisect runs it through the shell: this interpreter has torch
        bisect = await client.call_tool(
            "bisect_commits", {"repo": ".", "good": commits[0], "bad": "main", "command": command}
        )
        assert not bisect.is_error, bisect.content[0].text
        job = bisect.structured_content
        assert job is not None and job["first_bad_commit"]["hash"] == commits[3]
        offer = job["trace_diff"]
        assert offer["tool"] == "trace_diff"
        assert offer["arguments"] == {
            "command": command,
            "rev_a": commits[2][:12],
            "rev_b": commits[3][:12],
            "cwd": str(ws.resolve()),
        }
        assert f"next: trace_diff(command='{command}', rev_a='{commits[2][:12]}'" in bisect.content[0].text

        result = await client.call_tool("trace_diff", {**offer["arguments"], "steps": 3})
    assert not result.is_error, result.content[0].text
    out = result.structured_content
    assert out is not None and out["status"] == "succeeded" and out["verdict"] == "differs"
    first = out["first_difference"]
    line = BUGGY.lstrip().splitlines().index("    model.eval()  # check the output shape without dropout") + 1
    assert first["code"] == "call_missing" and first["only_in"] == "b"
    assert first["what"] == "model.eval()" and first["site_b"] == f"train.py:{line} in main"
    assert [v["rev"] for v in out["variants"]] == [commits[2][:12], commits[3][:12]]
    modes = [x for x in out["invariants"] if x["invariant"] == "mode_at_site"]
    assert (
        modes
        and modes[0]["step"] == 1
        and "eval mode where the good run is always in training mode" in modes[0]["message"]
    )
    assert any(f["code"] == "invariant_broken" for f in out["findings"])
    text = result.content[0].text
    assert "first difference: model.eval() at train.py:" in text
    # The checkout, its edit, its ignored data and its worktrees are as they were; no worktree is left.
    assert _state(ws) == before


@pytest.mark.anyio
async def test_bad_input_is_refused_with_what_to_give_instead(tmp_path: Path) -> None:
    ws = tmp_path / "proj"
    commits = _history(ws)
    (ws / "crash.py").write_text("raise SystemExit(3)\n")
    (ws / "notrain.py").write_text("import torch\nprint(torch.ones(2).sum())\n")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"command": "python train.py", "command_a": "x", "command_b": "y"}, "not both"),
        ({"command": "python train.py", "rev_a": commits[0]}, "give both rev_a and rev_b"),
        ({"command_a": "python train.py"}, "give both command_a and command_b"),
        ({"rev_a": commits[0], "rev_b": commits[1]}, "rev_a/rev_b need command"),
        ({}, "give command (the training command you run)"),
        ({"command": "python train.py"}, "the two variants are the same command"),
        (
            {"command": "python train.py", "rev_a": "no-such-rev", "rev_b": "main"},
            "rev_a 'no-such-rev' is not a commit",
        ),
        ({"command": "python train.py", "rev_a": "main", "rev_b": commits[-1]}, "are the same commit"),
        ({"command": "python 'unclosed", "rev_a": commits[0], "rev_b": "main"}, "cannot be split into words"),
        (
            {"command_a": "python train.py", "command_b": "python crash.py", "steps": 1},
            "variant b produced no trace",
        ),
        (
            {"command_a": "python notrain.py", "command_b": "python train.py", "steps": 1},
            "the good variant (a) did not train",
        ),
        (
            {"command": "python train.py", "python": "/bin/sh", "python_b": str(PY)},
            "outside the workspace and not allowed",
        ),
        ({"command_a": "python train.py", "command_b": "python train.py --x", "cwd": "/etc"}, "outside"),
        ({"command_a": "a", "command_b": "b", "steps": 0}, "steps"),
        ({"command_a": "a", "command_b": "b", "stpes": 3}, "steps"),
    ]
    async with Client(_server(ws)) as client:
        for args, expected in cases:
            result = await client.call_tool("trace_diff", args)
            text = result.content[0].text
            assert result.is_error, (args, text)
            assert expected in text, (args, text)
            assert "Traceback" not in text, (args, text)
    assert _git(ws, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_command_line_trace_diff_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "proj"
    commits = _history(ws)
    monkeypatch.chdir(ws)
    code = cli_main(
        ["trace-diff", "python train.py", "--rev-a", commits[2], "--rev-b", commits[3], "--steps", "2",
         "--python", str(PY), "--json", "--fail-on-difference"]
    )  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["first_difference"]["what"] == "model.eval()"
    code = cli_main(
        ["trace-diff", "python train.py", "--rev-a", "nope", "--rev-b", "main", "--python", str(PY), "--json"]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and not out["ok"] and "is not a commit" in out["error"]["message"]
    assert cli_main(["trace-diff", "python train.py", "--steps", "0"]) == 2

"""A new user's walk through every tool (issue 22.1): read the tool's card (`trainsleuth client
describe`, built by `describe_tool` from what tools/list publishes), take the example call it prints,
put this repository's real values in place of its placeholders (a real investigation id, a real log,
an entrypoint written as probe://entrypoint says, a real job id), add no argument the card did not
list, and call the tool on a real repo (the agent benchmark's `tabular_shuffle` case) through a real
`trainsleuth serve` over stdio.

No call may fail on argument names or values; a call the tool cannot carry out (the protocol's phase,
a run folder that does not exist yet) must say what to do next. The CLI route itself (`client describe`
then `client call` from the printed example) is walked for two tools."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from trainsleuth.clients.schema_help import describe_tool

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
TRAINSLEUTH = str(Path(PY).parent / "trainsleuth")

ENTRY = '''"""Probe entrypoint for the churn model (the contract: probe://entrypoint)."""
import torch
from torch import nn

from data import load_splits
from model import ChurnMLP


def make_probe():
    torch.manual_seed(0)
    x, y = load_splits()["train"]
    model = ChurnMLP(x.shape[1])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    return {
        "model": model,
        "batch": (x[:64], y[:64]),
        "loss_fn": lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1]),
        "optimizer": opt,
    }
'''

# Tools that must do their work on this repo from the card's example alone (values filled in).
MUST_SUCCEED = {
    "start_investigation", "get_investigation", "list_investigations", "record_evidence",
    "analyze_training_log", "extract_metrics", "probe_gradients", "diff_checkpoints",
    "environment_report", "bisect_commits", "get_job", "lookup_constraints", "compare_runs",
    "search_literature", "compare_precision",
}  # fmt: skip


def _run(ws: Path, *argv: str) -> None:
    subprocess.run(argv, cwd=ws, check=True, capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The benchmark case, with what a user has at hand: logs of two runs and two checkpoints."""
    ws = tmp_path_factory.mktemp("walk") / "churn"
    _run(ROOT, PY, "-m", "benchmarks.agent.build", "tabular_shuffle", str(ws))
    (ws / "logs").mkdir()
    (ws / "checkpoints").mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for name, lr in (("good", "3e-3"), ("bad", "3e-5")):
        subprocess.run(
            [PY, "train.py", "--epochs", "2", "--lr", lr, "--log-file", f"logs/{name}.log"],
            cwd=ws, check=True, capture_output=True, timeout=300, env=env,
        )  # fmt: skip
    (ws / "train.log").write_text((ws / "logs" / "bad.log").read_text())
    save = (
        "import torch; from model import ChurnMLP; torch.manual_seed(0); m = ChurnMLP(12); "
        "torch.save(m.state_dict(), 'checkpoints/step_100.pt'); "
        "[p.data.add_(0.1) for p in m.parameters()]; torch.save(m.state_dict(), 'checkpoints/step_200.pt')"
    )
    _run(ws, PY, "-c", save)
    scratch = ws / ".trainsleuth" / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "probe_entry.py").write_text(ENTRY)
    return ws


def _example(card: str) -> dict[str, Any]:
    m = re.search(r"^  arguments as JSON: (.*)$", card, re.M)
    assert m, card
    return dict(json.loads(m.group(1)))


def _listed(card: str) -> set[str]:
    return set(re.findall(r"^  [* ] (\w+) ", card, re.M))


def _fill(value: Any, real: dict[str, Any]) -> Any:
    """The user's own value in place of a placeholder of the card's example."""
    if isinstance(value, str):
        return real.get(value, value)
    if isinstance(value, list):
        return [_fill(v, real) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, real) for k, v in value.items()}
    return value


def _text(result: Any) -> str:
    return "\n".join(getattr(b, "text", "") for b in result.content)


def test_every_tool_from_its_card_on_a_real_repo(repo: Path, tmp_path: Path) -> None:
    # What this repo offers in place of the card's placeholders.
    bug = subprocess.run(
        ["git", "log", "--format=%H", "-1", "--grep", "shuffle the table once"],
        cwd=repo, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    real: dict[str, Any] = {
        "train.py:make_probe": ".trainsleuth/scratch/probe_entry.py:make_probe",
        "HEAD~10": "HEAD~3",
        "python -m pytest -x tests/test_train.py": "! grep -q 'def shuffled' data.py",
        "pandas": "churn-none",  # no such package: offline, and the error must say what to do
    }
    # Arguments the card lists that this user sets because they need them (never a name it did not print).
    extra: dict[str, dict[str, Any]] = {"bisect_versions": {"no_index": True}}
    env = {**os.environ, "TRAINSLEUTH_OFFLINE": "1", "OMP_NUM_THREADS": "1"}  # no public internet in tests
    params = StdioServerParameters(
        command=TRAINSLEUTH, args=["serve", "--workspace", str(repo)], cwd=str(repo), env=env
    )
    outcomes: dict[str, tuple[bool, str]] = {}

    async def walk() -> None:
        async with Client(params) as client:
            tools = (await client.list_tools()).tools
            assert tools[0].name == "start_investigation"
            for tool in tools:
                listed = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
                card = describe_tool(
                    tool.name, tool.description or "", listed["inputSchema"], listed.get("annotations") or {}
                )
                args = {**_fill(_example(card), real), **extra.get(tool.name, {})}
                assert set(args) <= _listed(card), (tool.name, args)
                result = await client.call_tool(tool.name, args)
                text = _text(result)
                outcomes[tool.name] = (bool(result.is_error), text)
                structured = result.structured_content or {}
                if tool.name == "start_investigation" and not result.is_error:
                    real["inv-0123abcd"] = structured["investigation_id"]
                if structured.get("job_id"):
                    real["job-0123456789ab"] = structured["job_id"]
                if tool.name == "bisect_commits" and not result.is_error:
                    assert structured["first_bad_commit"]["hash"] == bug, text

    anyio.run(walk)

    problems = []
    for name, (failed, text) in outcomes.items():
        print(f"{name}: {'refused' if failed else 'ok'}: {' | '.join(text.splitlines()[:2])[:240]}")
        if "Invalid arguments" in text or "unknown argument" in text.lower():
            problems.append(f"{name}: fails on its card's own arguments: {text[:300]}")
        elif failed and not re.search(r"Next step: \S.{10,}", text):
            problems.append(f"{name}: an error that does not say how to fix it: {text[:300]}")
        elif failed and name in MUST_SUCCEED:
            problems.append(f"{name}: should work from its card on this repo: {text[:300]}")
    assert not problems, "\n".join(problems)
    assert len(outcomes) >= 29


def test_the_cli_route_describe_then_call(repo: Path) -> None:
    """`trainsleuth client describe` prints a call; that very command line, run, works."""
    for tool, needs in (("lookup_constraints", "knowledge entries"), ("list_investigations", "")):
        card = subprocess.run(
            [TRAINSLEUTH, "client", "describe", tool, "--workspace", str(repo)],
            cwd=repo, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert card.returncode == 0, card.stderr
        line = next(
            ln.strip() for ln in card.stdout.splitlines() if ln.strip().startswith("trainsleuth client call")
        )
        argv = shlex.split(line)
        proc = subprocess.run(
            [TRAINSLEUTH, *argv[1:], "--workspace", str(repo)],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr + proc.stdout
        assert needs in proc.stdout

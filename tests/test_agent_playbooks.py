"""The agent benchmark's playbooks walk the whole protocol to a verified fix, through the real CLI.

Each case is built as a real git repository in a tmp folder; `trainsleuth client run` drives a real
`trainsleuth serve` over stdio with the dev interpreter (torch) first on PATH. The playbooks prove
what tests/test_agent_cases.py used to check by running check.sh itself: submit_diagnosis runs the
user's check.sh on the unfixed tree (it must fail there), verify_fix runs it after `git apply` of the
case's fix.patch (it must pass). Their expectations pin the decisive finding (the module, parameter,
commit or metric named in ANSWER.md), so a regression in a detector fails here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client

from benchmarks.agent.build import CASES, playbook_cases
from benchmarks.agent.playbooks import run_case
from benchmarks.protocol_calls import GOAL
from trainsleuth.clients.scripted import load_playbook
from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.server.schema import check_arguments
from trainsleuth.server.tools.protocol_common import PersonForm

REF = re.compile(r"\$\{[^}]+\}")


def _placeholders(value: Any) -> Any:
    """`${step.path}` stands for a value of an earlier step: an id or a text in every playbook."""
    if isinstance(value, str):
        return REF.sub("e1", value)
    if isinstance(value, list):
        return [_placeholders(v) for v in value]
    if isinstance(value, dict):
        return {k: _placeholders(v) for k, v in value.items()}
    return value


def test_every_case_has_a_playbook_with_the_whole_protocol() -> None:
    for name in playbook_cases():
        playbook = load_playbook(CASES / name / "playbook.yaml", workspace=CASES / name)
        tools = [s["tool"] for s in playbook.steps if "tool" in s]
        needed_tools = (
            "start_investigation",
            "submit_diagnosis",
            "approve_diagnosis",
            "verify_fix",
            "capture_knowledge",
        )
        for needed in needed_tools:
            assert needed in tools, (name, needed)
        decisive = [s for s in playbook.steps if "decisive" in str(s.get("name", ""))]
        assert decisive and all("tool" in s and s.get("expect") for s in decisive), name
        approve = next(s for s in playbook.steps if s.get("tool") == "approve_diagnosis")
        assert "standing in for the person" in approve["dialog"]["stand_in"], name


@pytest.mark.anyio
async def test_every_playbook_call_validates_against_the_published_schemas(tmp_path: Path) -> None:
    """No call of any playbook can fail on argument names, types, enums or bounds."""
    server, registry = build_server(ServerConfig(workspaces=[tmp_path]))
    async with Client(server) as client:
        published = {t.name: t.input_schema for t in (await client.list_tools()).tools}
    checked: dict[str, int] = {}
    for name in playbook_cases():
        playbook = load_playbook(CASES / name / "playbook.yaml", workspace=tmp_path)
        for step in playbook.steps:
            if "tool" not in step:
                continue
            tool = step["tool"]
            assert tool in published, (name, tool)
            args = _placeholders(dict(step.get("args") or {}))
            schema = published[tool]
            unknown = set(args) - set(schema.get("properties", {}))
            assert not unknown, (name, tool, unknown)
            jsonschema.validate(args, schema)
            spec = registry.tools[tool]
            _, _, problem = check_arguments(tool, spec.input_model, spec.schema, args)
            assert problem is None, (name, tool, problem)
            if "dialog" in step:  # the answer fits the person's form the server asks with
                PersonForm.model_validate({**step["dialog"]["answer"], "name": step["dialog"]["stand_in"]})
            checked[name] = checked.get(name, 0) + 1
    # every case: the five protocol calls and at least one diagnostic call, all checked
    assert len(checked) == len(playbook_cases()) and min(checked.values()) >= 6, checked


# `trainsleuth client run` (the playbook runner, its dialog stand-in answering the approval) on three cases
# that cover its paths; every case's playbook is walked step by step with the same expectations by
# tests/test_agent_honest_path.py (each case's check.sh runs twice per walk: walking all of them twice
# would cost make test about 10 minutes on 2 cores for no new coverage).
RUNNER_CASES = ["tabular_shuffle", "bf16_motion", "ddp_frozen_features"]


def test_the_runner_cases_are_cases() -> None:
    assert set(RUNNER_CASES) <= set(playbook_cases())


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", RUNNER_CASES)
def test_playbook_resolves_the_case_with_few_protocol_calls(name: str, tmp_path: Path) -> None:
    run = run_case(name, tmp_path)
    tails = [
        f"{s.get('name')}: {((s.get('structured') or {}).get('attempt') or {}).get('output_tail')}"
        for s in run.steps
        if s.get("tool") == "verify_fix"
    ]  # what check.sh printed after the fix, when verify_fix failed
    assert run.exit_code == 0, "\n".join(run.failures + tails) + "\n" + run.stderr
    assert run.resolved and run.decisive, run
    assert len(run.protocol) <= GOAL, run.protocol
    by_tool = {s.get("tool"): s for s in run.steps if s.get("tool")}
    reproduction = by_tool["submit_diagnosis"]["structured"]["diagnosis"]["reproduction"]
    assert reproduction["exit_code"] == 1 and not reproduction["timed_out"], (
        reproduction
    )  # check.sh fails unfixed
    verified = by_tool["verify_fix"]["structured"]
    assert verified["passed"] is True, verified["attempt"]["output_tail"]  # ... and passes with fix.patch

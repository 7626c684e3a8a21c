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

from benchmarks.agent.build import CASES, case_names
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
    for name in case_names():
        playbook = load_playbook(CASES / name / "playbook.yaml", workspace=CASES / name)
        tools = [s["tool"] for s in playbook.steps if "tool" in s]
        for needed in ("start_investigation", "submit_diagnosis", "approve_diagnosis", "begin_fix", "verify_fix",
                       "capture_knowledge"):  # fmt: skip
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
    checked = 0
    for name in case_names():
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
            checked += 1
    assert checked >= 7 * 8


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", case_names())
def test_playbook_resolves_the_case_with_few_protocol_calls(name: str, tmp_path: Path) -> None:
    run = run_case(name, tmp_path)
    assert run.exit_code == 0, "\n".join(run.failures) + "\n" + run.stderr
    assert run.resolved and run.decisive, run
    assert len(run.protocol) <= GOAL, run.protocol
    by_tool = {s.get("tool"): s for s in run.steps if s.get("tool")}
    reproduction = by_tool["submit_diagnosis"]["structured"]["diagnosis"]["reproduction"]
    assert reproduction["exit_code"] not in (0, None) or reproduction["timed_out"]  # check.sh fails unfixed
    assert by_tool["verify_fix"]["structured"]["passed"] is True  # ... and passes with fix.patch

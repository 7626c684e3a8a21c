"""The honest path of every agent case through `trainsleuth client call`, with no refused call (issue 27).

An assistant drives each case the way the blind benchmark's assistants do: from its shell, one
`trainsleuth client call` per step, knowing only what `trainsleuth client tools` and `trainsleuth client
describe` print. Its plan is the case's playbook (the evidence it gathers, the diagnosis it writes, the fix
it makes); what it sends is what the cards allow:

- every argument it passes is on the tool's card, and every required one (`*`) is passed;
- a diagnosis carries its required arguments and those whose card says "Required when ..." where that
  holds, and nothing else (the minimal honest diagnosis: no side effects, alternatives or disproof notes);
- a long tool is followed with `--wait` (from `trainsleuth client call --help`), so no get_job by hand;
- the person approves in their own terminal (`trainsleuth approve` in a real pseudo-terminal), while the
  assistant's approve_diagnosis waits for that answer.

Every call must succeed (no isError, exit 0), the fix must be verified and the investigation closed; the
calls go to the workspace's kept server. The help and protocol calls of each case are printed (run with
`-s`): they are the floor the blind benchmark's with-trainsleuth arm is compared against.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from test_protocol_helpers import in_a_terminal

from benchmarks.agent.build import CASES, build_case, case_names
from benchmarks.agent.playbooks import case_env
from benchmarks.protocol_calls import PROTOCOL_TOOLS
from trainsleuth.clients.playbook_steps import write_file
from trainsleuth.clients.scripted import StepResult, check_expectations, load_playbook, substitute

TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")
ARG_LINE = re.compile(r"^\s+([* ])\s(\S+)\s+(.*)$")
REQUIRED_WHEN = re.compile(r"Required when ([^.]+)\.")


@dataclass
class Card:
    """What `client tools` and `client describe` say of one tool's arguments."""

    required: set[str] = field(default_factory=set)
    names: set[str] = field(default_factory=set)
    required_when: dict[str, str] = field(default_factory=dict)  # argument -> its condition, in words


@dataclass
class Walk:
    case: str
    repo: Path
    env: dict[str, str]
    cards: dict[str, Card] = field(default_factory=dict)
    calls: list[tuple[str, str, bool]] = field(default_factory=list)  # (kind, what, refused)
    saved: dict[str, Any] = field(default_factory=dict)
    start_reproducer: bool = False

    def trainsleuth(self, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [TRAINSLEUTH, *args], cwd=self.repo, env=self.env, capture_output=True, text=True, timeout=timeout,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def count(self, kind: str) -> int:
        return sum(1 for k, _, _ in self.calls if k == kind)


def read_cards(walk: Walk, tools: list[str]) -> None:
    """Two help calls: the tool list (argument names, required starred), then the cards of the tools used."""
    listed = walk.trainsleuth("client", "tools")
    walk.calls.append(("help", "client tools", listed.returncode != 0))
    name = None
    for line in listed.stdout.splitlines():
        if not line.startswith(" ") and ":" in line:
            name = line.split(":", 1)[0]
        elif name and line.strip().startswith("args:"):
            args = [a.strip() for a in line.split(":", 1)[1].split(",") if a.strip() != "(none)"]
            walk.cards[name] = Card({a[:-1] for a in args if a.endswith("*")}, {a.rstrip("*") for a in args})
    described = walk.trainsleuth("client", "describe", *tools)
    walk.calls.append(("help", "client describe " + " ".join(tools), described.returncode != 0))
    for block in described.stdout.split("\n\n"):
        tool = block.split(":", 1)[0].strip()
        for line in block.splitlines():
            m = ARG_LINE.match(line)
            if m and tool in walk.cards:
                cond = REQUIRED_WHEN.search(m.group(3))
                if cond:
                    walk.cards[tool].required_when[m.group(2)] = cond.group(1)


def conditions(walk: Walk, args: dict[str, Any]) -> dict[str, Callable[[], bool]]:
    """What the assistant knows of each "Required when ..." condition it may meet on a card."""
    return {
        "start_investigation gave none": lambda: not walk.start_reproducer,
        "no hypothesis is confirmed": lambda: True,  # these paths confirm no hypothesis
        "no_new_knowledge": lambda: bool(args.get("no_new_knowledge")),
        "abandon": lambda: bool(args.get("abandon")),
    }


def shape(walk: Walk, tool: str, planned: dict[str, Any]) -> dict[str, Any]:
    """The call the assistant makes from the card: checked against it, minimal for a diagnosis."""
    card = walk.cards[tool]
    top = {k for k in planned if "." not in k}
    assert top <= card.names, f"{tool}: {sorted(top - card.names)} are not on its card"
    assert card.required <= set(planned), (
        f"{tool}: the plan lacks required {sorted(card.required - set(planned))}"
    )
    known = conditions(walk, planned)
    wanted = set(card.required)
    for arg, condition in card.required_when.items():
        assert condition in known, f"{tool}.{arg}: a condition the assistant cannot judge: {condition!r}"
        if known[condition]():
            assert arg in planned, f"{tool}.{arg} is required when {condition}, and the plan lacks it"
            wanted.add(arg)
    if tool == "submit_diagnosis":
        return {k: v for k, v in planned.items() if k in wanted}
    return {k: v for k, v in planned.items() if k not in card.required_when or k in wanted}


def person_approves_soon(walk: Walk, shown: list[str]) -> threading.Thread:
    """The person, told by the assistant, runs `trainsleuth approve` in their own terminal a moment later."""

    def decide() -> None:
        time.sleep(2)
        code, text = in_a_terminal(
            [TRAINSLEUTH, "approve", "--workspace", str(walk.repo)],
            "Ann\napprove\nlooks right\n",
            walk.repo,
            env=walk.env,
        )
        shown.append(f"exit {code}\n{text}")

    person = threading.Thread(target=decide)
    person.start()
    return person


def call(walk: Walk, name: str, tool: str, args: dict[str, Any], expect: dict[str, Any] | None) -> None:
    proc = walk.trainsleuth(
        "client",
        "call",
        tool,
        "--args-json",
        json.dumps(args),
        "--json",
        "--wait",
        "1800",
        "--workspace",
        str(walk.repo),
    )
    out = (
        json.loads(proc.stdout)
        if proc.stdout.strip().startswith("{")
        else {"is_error": True, "text": proc.stderr}
    )
    refused = proc.returncode != 0 or bool(out.get("is_error"))
    walk.calls.append(("protocol" if tool in PROTOCOL_TOOLS else "diagnostic", tool, refused))
    assert not refused, f"{walk.case}: {name} ({tool}) was refused:\n{out.get('text')}\n{proc.stderr[-2000:]}"
    walk.saved[name] = out.get("structured")
    if expect:
        result = StepResult(name, "tool", tool, False, str(out.get("text", "")), out.get("structured"))
        failures = check_expectations(result, substitute(expect, walk.saved))
        assert not failures, f"{walk.case}: {name}: {failures}"


def walk_case(case: str, work: Path) -> Walk:
    repo = build_case(case, work / case)
    env = {
        **case_env(work / f"{case}-state"),
        "TRAINSLEUTH_KEEP_SERVER": "1",
        "TRAINSLEUTH_APPROVAL_WAIT_S": "120",
    }
    walk = Walk(case, repo, env)
    playbook = load_playbook(CASES / case / "playbook.yaml", workspace=repo)
    tools = list(dict.fromkeys(str(s["tool"]) for s in playbook.steps if "tool" in s))
    read_cards(walk, tools)
    try:
        for i, step in enumerate(playbook.steps, 1):
            name = str(step.get("name") or f"step{i}")
            if "write" in step:
                write_file(repo, substitute(step["write"], walk.saved))
            elif "shell" in step:
                shell = subprocess.run(
                    ["/bin/sh", "-c", str(step["shell"])], cwd=repo, capture_output=True, text=True, timeout=900,
                    env={**env, "PLAYBOOK_DIR": str(CASES / case), "WORKSPACE": str(repo)},
                )  # fmt: skip
                assert shell.returncode == 0, f"{case}: {name}: {shell.stdout[-2000:]}{shell.stderr[-2000:]}"
            elif "tool" in step:
                tool = str(step["tool"])
                args = shape(walk, tool, substitute(dict(step.get("args") or {}), walk.saved))
                if tool == "start_investigation":
                    walk.start_reproducer = bool(args.get("reproducer"))
                expect = None if "dialog" in step else step.get("expect")  # a dialog's answer is the person's
                if tool == "approve_diagnosis":
                    shown: list[str] = []
                    person = person_approves_soon(walk, shown)
                    try:
                        call(walk, name, tool, args, expect)
                    finally:
                        person.join()
                    assert shown and shown[0].startswith("exit 0"), shown
                    assert walk.saved[name]["path"] == "terminal"
                else:
                    call(walk, name, tool, args, expect)
    finally:
        walk.trainsleuth("client", "stop", "--workspace", str(repo), timeout=60)
    return walk


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("case", case_names())
def test_the_honest_path_is_never_refused(case: str, tmp_path: Path) -> None:
    walk = walk_case(case, tmp_path)
    assert not [c for c in walk.calls if c[2]], walk.calls
    verified = walk.saved.get("verify") or {}
    assert verified.get("passed") is True, verified
    assert (walk.saved.get("close") or {}).get("phase") == "closed"
    protocol = [what for kind, what, _ in walk.calls if kind == "protocol"]
    print(
        f"\n{case}: {walk.count('help')} help + {len(protocol)} protocol ({', '.join(protocol)}) + "
        f"{walk.count('diagnostic')} diagnostic calls, none refused"
    )
    assert walk.count("help") <= 2 and len(protocol) <= 6

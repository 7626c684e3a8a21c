"""Helpers shared by the protocol tests: real git repositories and a real MCP client driving the protocol."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters
from mcp_types import TextContent

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig

TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def make_repo(ws: Path, files: dict[str, str]) -> Path:
    """A git repository with one commit holding `files`."""
    ws.mkdir(parents=True, exist_ok=True)
    git(ws, "init", "-q", "-b", "main")
    git(ws, "config", "user.email", "dev@example.com")
    git(ws, "config", "user.name", "Dev")
    git(ws, "config", "commit.gpgsign", "false")
    for name, text in files.items():
        path = ws / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "baseline")
    return ws


def text_of(result: Any) -> str:
    """The text of a tool result's first content block."""
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return block.text


def stdio_params(workspace: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=TRAINSLEUTH,
        args=["serve", "--workspace", str(workspace), *extra],
        cwd=str(workspace),
        env=dict(os.environ),
    )


CODE = re.compile(r"One-time code: (\d{4}-\d{4})")


class Person:
    """The person at the keyboard: reads what the server shows on its own channel (never a tool result)
    and, when they agree, hands the one-time code to the assistant."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def see(self, text: str) -> None:
        self.seen.append(text)

    def code(self) -> str:
        for text in reversed(self.seen):
            m = CODE.search(text)
            if m:
                return m.group(1)
        raise AssertionError("the server showed the person no code")


def server_with_person(ws: Path, **config: Any) -> tuple[Any, Any, Person]:
    """An in-memory server whose approval channel is a Person the test plays."""
    person = Person()
    server, registry = build_server(ServerConfig(workspaces=[ws], approval_notifier=person.see, **config))
    return server, registry, person


class Driver:
    """Calls protocol tools and asserts success unless told otherwise."""

    def __init__(self, client: Any, person: Any = None) -> None:
        self.c = client
        self.person = person

    async def ok(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        r = await self.c.call_tool(name, args)
        assert not r.is_error, f"{name} failed: {text_of(r)}"
        assert r.structured_content is not None
        return r.structured_content

    async def refused(self, name: str, args: dict[str, Any], *needles: str) -> str:
        r = await self.c.call_tool(name, args)
        text = text_of(r)
        assert r.is_error, f"{name} was not refused: {text}"
        assert "Next step:" in text, text
        for needle in needles:
            assert needle.lower() in text.lower(), f"{needle!r} not in {text!r}"
        return text

    async def start(self, **kw: Any) -> str:
        args = {
            "symptom": "loss becomes NaN after the learning-rate change",
            "reproducible": "always",
            "what_changed": "raised lr from 1 to 10",
        }
        args.update(kw)
        out = await self.ok("start_investigation", args)
        return str(out["investigation_id"])

    async def evidence(self, iid: str, summary: str = "lr is 10 in train.py") -> str:
        out = await self.ok(
            "record_evidence", {"investigation_id": iid, "summary": summary, "data": {"lr": 10}}
        )
        return str(out["evidence_id"])

    def diagnosis(self, iid: str, ev: str, **kw: Any) -> dict[str, Any]:
        d: dict[str, Any] = {
            "investigation_id": iid,
            "symptom": "loss NaN at step 3",
            "root_cause": "learning rate 10 is far too high for SGD on this model",
            "evidence_ids": [ev],
            "mechanism": "updates overshoot, weights blow up, loss overflows to NaN",
            "proposed_fix": {"files": ["train.py"], "change": "set lr back to 1"},
            "side_effects": "slower early progress",
            "will_not_fix": "the data pipeline",
            "confidence": 0.9,
            "alternatives_considered": ["bad batch", "fp16 overflow"],
            "disproving_observation": "NaN persists with lr=1",
            "disproof_looked_for": False,
        }
        d.update(kw)
        return d

    async def full_hypotheses(self, iid: str, ev: str) -> str:
        hyps = [
            {"statement": f"cause {i}", "confirm_if": f"sees {i}", "rule_out_if": f"no {i}"}
            for i in range(1, 4)
        ]
        out = await self.ok("propose_hypotheses", {"investigation_id": iid, "hypotheses": hyps})
        first = out["under_test"]
        await self.ok(
            "resolve_hypothesis",
            {"investigation_id": iid, "hypothesis_id": first, "outcome": "confirmed", "evidence_ids": [ev]},
        )
        return str(first)

    async def approve(self, iid: str, **extra: Any) -> dict[str, Any]:
        """The person approves: in their own terminal (`trainsleuth approve`), or through the one-time code
        the server showed them (asking for one if needed)."""
        assert self.person is not None, "give the Driver the Person who sees the server's approval channel"
        if hasattr(self.person, "decide_in_terminal"):
            r = await self.c.call_tool("approve_diagnosis", {"investigation_id": iid})
            if r.is_error:
                assert "trainsleuth approve" in text_of(r), text_of(r)
            self.person.decide_in_terminal()
            return await self.ok("approve_diagnosis", {"investigation_id": iid, **extra})
        before = len(self.person.seen)
        if not self.person.seen or not CODE.search(self.person.seen[-1]):
            r = await self.c.call_tool("approve_diagnosis", {"investigation_id": iid})
            assert r.is_error and "one-time code" in text_of(r), text_of(r)
            assert "One-time code" not in text_of(r)  # never in a tool result
            assert len(self.person.seen) > before
        args = {
            "investigation_id": iid,
            "code": self.person.code(),
            "approver": "Ann",
            "words": "yes, go ahead",
        }
        args.update(extra)
        return await self.ok("approve_diagnosis", args)

    async def approved(self, iid: str, hypotheses: bool = False, **diag: Any) -> str:
        """Evidence, (hypotheses,) diagnosis and the person's approval; returns the diagnosis id."""
        ev = await self.evidence(iid)
        if hypotheses:
            await self.full_hypotheses(iid, ev)
        out = await self.ok("submit_diagnosis", self.diagnosis(iid, ev, **diag))
        await self.approve(iid)
        return str(out["diagnosis"]["id"])

    async def get(self, iid: str) -> dict[str, Any]:
        out = await self.ok("get_investigation", {"investigation_id": iid, "timeline_limit": 500})
        if "full_result" in out:  # a big investigation: the whole result is kept beside it
            import json

            out = json.loads(Path(out["full_result"]["path"]).read_text())
        return dict(out["investigation"])


def in_a_terminal(
    argv: list[str], answers: str, cwd: Path, timeout: float = 120, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """Run a trainsleuth command the way a person does, in a terminal (a real pseudo-terminal), typing
    `answers`; returns (exit code, what the terminal showed)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, start_new_session=True, env=env
    )
    os.close(slave)
    os.write(master, answers.encode())
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    code = proc.wait(timeout=30)
    return code, out.decode(errors="replace")


def approve_in_terminal(ws: Path, answer: str = "approve", name: str = "Ann") -> str:
    """The person runs `trainsleuth approve` in their own terminal and types their decision."""
    code, shown = in_a_terminal(
        [TRAINSLEUTH, "approve", "--workspace", str(ws)], f"{name}\n{answer}\nok\n", ws
    )
    assert code == 0, shown
    return shown


class TerminalPerson:
    """The person at their own terminal: decides requests with `trainsleuth approve` (a real pty)."""

    def __init__(self, ws: Path) -> None:
        self.ws = ws
        self.seen: list[str] = []

    def decide_in_terminal(self, answer: str = "approve") -> None:
        self.seen.append(approve_in_terminal(self.ws, answer))

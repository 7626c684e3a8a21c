"""The traces one observed run produced: one per Python process that imported torch, read from the
observer's reports (`plugins.trace`, written by `runners/_ts_observe_trace.py`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

SITE = re.compile(r"^(?P<path>.*):(?P<line>\d+) in (?P<func>.*)$")


@dataclass
class ProcTrace:
    """The trace of one process: its events in order, grouped by observed step."""

    rank: int
    node: int
    pid: int
    events: list[dict[str, Any]]
    names: dict[str, str]
    seeds: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)
    reason: str | None = None
    exception: dict[str, Any] | None = None
    trained_steps: int = 0
    world_size: int = 1

    def steps(self) -> dict[int, list[dict[str, Any]]]:
        out: dict[int, list[dict[str, Any]]] = {}
        for ev in self.events:
            out.setdefault(int(ev.get("k", 0)), []).append(ev)
        return out

    def name(self, key: str | None) -> str:
        if not key:
            return "?"
        if key in self.names:
            return self.names[key]
        if key.startswith("o") and "/" not in key:
            return f"optimizer {key[1:]}"
        return key


@dataclass
class VariantTrace:
    label: str
    procs: list[ProcTrace]

    def by_rank(self) -> dict[int, ProcTrace]:
        return {p.rank: p for p in self.procs}


def load_traces(reports: list[dict[str, Any]], label: str) -> VariantTrace:
    """The processes of one run that carry a trace (torch imported, the tracer ran), in rank order."""
    procs: list[ProcTrace] = []
    for rep in reports:
        section = (rep.get("plugins") or {}).get("trace")
        if not isinstance(section, dict) or not isinstance(section.get("events"), list):
            continue
        ident = rep.get("identity") or {}
        steps = sum(int(o.get("steps") or 0) for o in rep.get("optimizers") or [])
        procs.append(
            ProcTrace(
                rank=int(ident.get("rank") or 0),
                node=int(ident.get("node") or 0),
                pid=int(ident.get("pid") or 0),
                events=sorted(section["events"], key=lambda e: int(e.get("s", 0))),
                names=dict(section.get("names") or {}),
                seeds=list(section.get("seeds") or []),
                notes=list(section.get("notes") or []) + list(rep.get("notes") or []),
                dropped=dict(section.get("dropped") or {}),
                reason=rep.get("reason"),
                exception=rep.get("exception"),
                trained_steps=steps,
                world_size=int(ident.get("world_size") or 1),
            )
        )
    # A launcher (torchrun's parent) imports torch but trains nothing: keep only the training processes
    # when there are any, else every traced process (a run that failed before training).
    training = [p for p in procs if p.trained_steps or any(e.get("kind") == "param" for e in p.events)]
    chosen = training or procs
    chosen.sort(key=lambda p: (p.node, p.rank, p.pid))
    return VariantTrace(label=label, procs=chosen)


def site_parts(site: str | None) -> tuple[str, int, str] | None:
    """(path, line, function) of a `path:line in function` site."""
    if not site:
        return None
    m = SITE.match(site)
    if not m:
        return None
    return m.group("path"), int(m.group("line")), m.group("func")


def site_key(site: str | None) -> tuple[str, str] | None:
    """A site without its line number (file name and function): stable when lines move."""
    parts = site_parts(site)
    if parts is None:
        return None
    return PurePosixPath(parts[0]).name, parts[2]

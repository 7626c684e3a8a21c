"""The built-in knowledge base: failure-mode catalog, checklists and fix-pattern archive.

Data lives in YAML under `trainsleuth/knowledge/data/` and is loaded lazily (first use) and once.
The finding codes of each failure mode come from `links.CODE_LINKS` (the single source of truth).
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from trainsleuth.knowledge.links import CODE_LINKS

ID_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")

TOPICS = (
    "numerics",
    "optimisation",
    "data",
    "architecture",
    "training-loop",
    "mixed-precision",
    "distributed",
    "rl-fine-tuning",
    "discrete-codebooks",
    "checkpoints-and-versions",
    "performance-and-hangs",
)


class Check(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool: str = Field(description="trainsleuth tool to run, or 'manual' for a by-hand check")
    args: dict[str, Any] = Field(default_factory=dict)
    look_for: str


class Fix(BaseModel):
    model_config = ConfigDict(extra="forbid")
    fix: str
    trade_off: str


class FailureMode(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    title: str
    topic: str
    symptoms: list[str] = Field(min_length=1)
    codes: list[str] = Field(
        default_factory=list, description="finding codes that point here (from links.py)"
    )
    root_causes: list[str] = Field(min_length=1)
    checks: list[Check] = Field(min_length=1)
    fixes: list[Fix] = Field(min_length=1)
    sources: list[str] = Field(min_length=1)
    keywords: list[str] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _kebab(cls, v: str) -> str:
        if not ID_PATTERN.match(v):
            raise ValueError(f"catalog id {v!r} is not kebab-case")
        return v

    @field_validator("keywords", mode="before")
    @classmethod
    def _keywords_as_text(cls, v: Any) -> Any:
        return [str(k) for k in v] if isinstance(v, list) else v

    @field_validator("topic")
    @classmethod
    def _topic(cls, v: str) -> str:
        if v not in TOPICS:
            raise ValueError(f"unknown topic {v!r}; one of {', '.join(TOPICS)}")
        return v

    @property
    def uri(self) -> str:
        return f"failure-mode://{self.id}"

    def to_markdown(self) -> str:
        out = [f"# {self.title}", "", f"`{self.id}` · topic: {self.topic}", ""]
        if self.codes:
            out += ["Finding codes that point here: " + ", ".join(f"`{c}`" for c in self.codes), ""]
        out += ["## Symptoms", *[f"- {s}" for s in self.symptoms], ""]
        out += ["## Root causes", *[f"- {s}" for s in self.root_causes], ""]
        out += ["## Checks to run"]
        for c in self.checks:
            args = ", ".join(f"{k}={v!r}" for k, v in c.args.items())
            call = f"`{c.tool}({args})`" if c.tool != "manual" else "By hand"
            out.append(f"- {call}: {c.look_for}")
        out += ["", "## Fixes and their trade-offs"]
        out += [f"- **{f.fix}** Trade-off: {f.trade_off}" for f in self.fixes]
        out += ["", "## Sources", *[f"- {s}" for s in self.sources]]
        return "\n".join(out) + "\n"


class ChecklistItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    check: str
    how: str
    failure_modes: list[str] = Field(default_factory=list)


class Checklist(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    title: str
    when: str
    items: list[ChecklistItem] = Field(min_length=3)

    @property
    def uri(self) -> str:
        return f"checklist://{self.name}"

    def to_markdown(self) -> str:
        out = [f"# Checklist: {self.title}", "", f"Use when: {self.when}", ""]
        for i, item in enumerate(self.items, 1):
            refs = ""
            if item.failure_modes:
                refs = " (see " + ", ".join(f"failure-mode://{f}" for f in item.failure_modes) + ")"
            out.append(f"{i}. [ ] **{item.check}** {item.how}{refs}")
        return "\n".join(out) + "\n"


class FixPattern(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    title: str
    symptom: str
    root_cause: str
    fix: str
    lesson: str
    failure_modes: list[str] = Field(min_length=1)
    before: str | None = None
    after: str | None = None

    @field_validator("id")
    @classmethod
    def _kebab(cls, v: str) -> str:
        if not ID_PATTERN.match(v):
            raise ValueError(f"fix-pattern id {v!r} is not kebab-case")
        return v

    @property
    def uri(self) -> str:
        return f"fix-pattern://{self.id}"

    def to_markdown(self) -> str:
        out = [
            f"# Fix pattern: {self.title}",
            "",
            f"- **Symptom:** {self.symptom}",
            f"- **Root Cause:** {self.root_cause}",
            f"- **Fix:** {self.fix}",
            f"- **Lesson:** {self.lesson}",
            "- **Failure modes:** " + ", ".join(f"failure-mode://{f}" for f in self.failure_modes),
        ]
        if self.before:
            out += ["", "Before:", "```python", self.before.rstrip(), "```"]
        if self.after:
            out += ["", "After:", "```python", self.after.rstrip(), "```"]
        return "\n".join(out) + "\n"


class CatalogError(RuntimeError):
    pass


def _load_yaml(name: str) -> Any:
    import yaml

    text = (
        resources.files("trainsleuth.knowledge").joinpath("data").joinpath(name).read_text(encoding="utf-8")
    )
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise CatalogError(f"knowledge data file {name} is not valid YAML: {exc}") from exc


def _data_files(prefix: str) -> list[str]:
    folder = resources.files("trainsleuth.knowledge").joinpath("data")
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(prefix) and p.name.endswith(".yaml"))


@functools.lru_cache(maxsize=1)
def failure_modes() -> dict[str, FailureMode]:
    """All catalog entries by id (loaded once)."""
    reverse: dict[str, list[str]] = {}
    for code, ids in CODE_LINKS.items():
        for fid in ids:
            reverse.setdefault(fid, []).append(code)
    out: dict[str, FailureMode] = {}
    for name in _data_files("failure_modes"):
        raw = _load_yaml(name) or []
        if not isinstance(raw, list):
            raise CatalogError(f"{name}: expected a list of entries")
        for item in raw:
            if not isinstance(item, dict):
                raise CatalogError(f"{name}: entry {item!r} is not a mapping")
            item = {**item, "codes": sorted(reverse.get(str(item.get("id")), []))}
            try:
                fm = FailureMode.model_validate(item)
            except ValueError as exc:
                raise CatalogError(f"{name}: entry {item.get('id')!r} is malformed: {exc}") from exc
            if fm.id in out:
                raise CatalogError(f"{name}: duplicate catalog id {fm.id!r}")
            out[fm.id] = fm
    return out


@functools.lru_cache(maxsize=1)
def checklists() -> dict[str, Checklist]:
    raw = _load_yaml("checklists.yaml") or []
    out: dict[str, Checklist] = {}
    for item in raw:
        cl = Checklist.model_validate(item)
        out[cl.name] = cl
    return out


@functools.lru_cache(maxsize=1)
def fix_patterns() -> dict[str, FixPattern]:
    raw = _load_yaml("fix_patterns.yaml") or []
    out: dict[str, FixPattern] = {}
    for item in raw:
        fp = FixPattern.model_validate(item)
        out[fp.id] = fp
    return out


def get_failure_mode(fid: str) -> FailureMode | None:
    return failure_modes().get(fid)


_QUICK_ITEM = re.compile(r"^- (id|name): *([A-Za-z0-9-]+) *$")
_QUICK_TITLE = re.compile(r"^  title: *(.+?) *$")


def _quick_scan(prefix: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    folder = resources.files("trainsleuth.knowledge").joinpath("data")
    for name in _data_files(prefix):
        pending: str | None = None
        for line in folder.joinpath(name).read_text(encoding="utf-8").splitlines():
            m = _QUICK_ITEM.match(line)
            if m:
                pending = m.group(2)
                continue
            t = _QUICK_TITLE.match(line)
            if t and pending:
                out.append((pending, t.group(1).strip("'\"")))
                pending = None
    return out


@functools.lru_cache(maxsize=1)
def quick_index() -> dict[str, list[tuple[str, str]]]:
    """(id, title) of every failure mode, checklist and fix pattern, read without parsing YAML, so the
    server can list its resources at start-up cheaply; contents are parsed on first read.
    A test checks it agrees with the full parse."""
    return {
        "failure_mode": _quick_scan("failure_modes"),
        "checklist": _quick_scan("checklists"),
        "fix_pattern": _quick_scan("fix_patterns"),
    }

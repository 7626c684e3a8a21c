"""Parse a project's own knowledge files: the constraints file and the topic docs it points to.

Two layouts are in common use and both are understood:

* heading layout: numbered ``### N. Title`` entries grouped under category headers (``## Numerics``),
  where later insertions get letter suffixes (``### 9a. ...``);
* list layout: numbered ``N. **rule**`` items (optionally under category headers) whose details are
  indented bullets below the item.

Each entry is addressable by its number ("9a"); entries of topic docs are addressed as
``<relative path>#<number>`` (or ``#<slug>`` for unnumbered sections).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Layout = Literal["heading", "list"]

DEFAULT_CONSTRAINTS = Path(".agents/knowledge/constraints.md")
DEFAULT_FIX_PATTERNS = Path(".agents/knowledge/fix-patterns.md")
# Where knowledge goes in a project that has not opted in to sharing it (no `.agents/knowledge/` folder):
# inside trainsleuth's own git-ignored folder, so capture_knowledge leaves the user's repository as found.
PRIVATE_KNOWLEDGE = Path(".trainsleuth/knowledge")


def _default(workspace: Path, shared: Path) -> Path:
    """The shared file when the project keeps `.agents/knowledge/`, else the private one."""
    if (workspace / shared.parent).is_dir():
        return workspace / shared
    return workspace / PRIVATE_KNOWLEDGE / shared.name


ENV_CONSTRAINTS = "TRAINSLEUTH_CONSTRAINTS_FILE"
ENV_FIX_PATTERNS = "TRAINSLEUTH_FIX_PATTERNS_FILE"
MAX_FILE_BYTES = 2_000_000
MAX_TOPIC_DOCS = 50

_HEADER = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_NUMBERED_HEADING = re.compile(r"^(#{2,6})\s+(\d+)([a-z]?)[.):]\s+(.*?)\s*$", re.IGNORECASE)
_LIST_ITEM = re.compile(r"^(\d+)([a-z]?)[.)]\s+(.*\S)\s*$", re.IGNORECASE)
_BOLD_LEAD = re.compile(r"^\*\*(.+?)\*\*[\s:.\-–—]*(.*)$")
_MD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s#]+\.(?:md|markdown|txt|rst))(?:#[^)]*)?\)", re.IGNORECASE)
_CODE_PATH = re.compile(r"`([^`\s]+\.(?:md|markdown))`", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass
class ConstraintEntry:
    number: str  # "9a"; for unnumbered topic-doc sections, a slug
    title: str
    body: str
    category: str | None
    path: Path
    line: int  # 1-based line of the entry's first line
    end_line: int  # 1-based line of its last non-blank line
    address: str  # "9a" in the main file, "docs/dist.md#3" in a topic doc

    @property
    def pointer(self) -> str:
        return f"{self.path}:{self.line}"

    def text(self) -> str:
        return f"{self.title}\n{self.body}".strip()


@dataclass
class ParsedFile:
    path: Path
    layout: Layout | None
    entries: list[ConstraintEntry] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)


@dataclass
class ProjectKnowledge:
    workspace: Path
    constraints_file: Path
    files: list[ParsedFile] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def entries(self) -> list[ConstraintEntry]:
        return [e for f in self.files for e in f.entries]

    def find(self, address: str) -> list[ConstraintEntry]:
        """Entries whose address (or number, for the main file) matches, case-insensitively."""
        want = address.strip().lstrip("#").lower()
        return [e for e in self.entries if e.address.lower() == want]


# ---------------------------------------------------------------------------- configuration


def _pyproject_settings(workspace: Path) -> dict[str, object]:
    pyproject = workspace / "pyproject.toml"
    if not pyproject.is_file():
        return {}
    try:
        import tomllib
    except ImportError:  # Python 3.10: no tomllib; env vars still work
        return {}
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    section = data.get("tool", {}).get("trainsleuth", {}).get("knowledge", {})
    return section if isinstance(section, dict) else {}


def _resolve(workspace: Path, value: str | Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else workspace / p


def constraints_path(workspace: Path) -> Path:
    """Where the project's constraints live: $TRAINSLEUTH_CONSTRAINTS_FILE, else
    ``[tool.trainsleuth.knowledge] constraints_file`` in pyproject.toml, else `.agents/knowledge/constraints.md`
    when the project keeps that folder, else `.trainsleuth/knowledge/constraints.md` (not in the repository)."""
    env = os.environ.get(ENV_CONSTRAINTS)
    if env:
        return _resolve(workspace, env)
    value = _pyproject_settings(workspace).get("constraints_file")
    if isinstance(value, str) and value:
        return _resolve(workspace, value)
    return _default(workspace, DEFAULT_CONSTRAINTS)


def fix_patterns_path(workspace: Path) -> Path:
    """Where the project's fix-pattern records live (same precedence as `constraints_path`)."""
    env = os.environ.get(ENV_FIX_PATTERNS)
    if env:
        return _resolve(workspace, env)
    value = _pyproject_settings(workspace).get("fix_patterns_file")
    if isinstance(value, str) and value:
        return _resolve(workspace, value)
    return _default(workspace, DEFAULT_FIX_PATTERNS)


# ---------------------------------------------------------------------------- parsing


def slugify(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:60] or "section"


def _strip_md(text: str) -> str:
    return re.sub(r"\*\*|__|`", "", text).strip()


def detect_layout(lines: list[str]) -> Layout | None:
    heading = sum(1 for ln in lines if _NUMBERED_HEADING.match(ln))
    listed = sum(1 for ln in lines if _LIST_ITEM.match(ln) and "**" in ln)
    if heading == 0 and listed == 0:
        listed = sum(1 for ln in lines if _LIST_ITEM.match(ln))
    if heading == 0 and listed == 0:
        return None
    return "heading" if heading >= listed else "list"


def _code_fenced(lines: list[str]) -> list[bool]:
    inside = False
    flags: list[bool] = []
    for ln in lines:
        if _FENCE.match(ln):
            flags.append(True)
            inside = not inside
            continue
        flags.append(inside)
    return flags


def parse_text(text: str, path: Path, *, address_prefix: str = "") -> ParsedFile:
    """Parse one markdown knowledge file. Never raises on odd content."""
    lines = text.splitlines()
    fenced = _code_fenced(lines)
    layout = detect_layout([ln for ln, f in zip(lines, fenced, strict=True) if not f])
    parsed = ParsedFile(path=path, layout=layout)
    parsed.links = _links(text)

    category: str | None = None
    entry_level = 0
    current: dict[str, object] | None = None
    body: list[str] = []

    def close(end_index: int) -> None:
        nonlocal current, body
        if current is None:
            return
        while body and not body[-1].strip():
            body.pop()
        first = int(current["line"])  # type: ignore[call-overload]
        last = end_index
        while last > first and not lines[last - 1].strip():
            last -= 1
        number = str(current["number"])
        parsed.entries.append(
            ConstraintEntry(
                number=number,
                title=str(current["title"]),
                body="\n".join(body).strip("\n"),
                category=current["category"],  # type: ignore[arg-type]
                path=path,
                line=int(current["line"]),  # type: ignore[call-overload]
                end_line=last,
                address=f"{address_prefix}{number}",
            )
        )
        current = None
        body = []

    title_seen = False

    def enter_header(level: int, text: str) -> str | None:
        """The category a header starts: the file's first top-level header is its title, not a category."""
        nonlocal title_seen
        if level == 1 and not title_seen:
            title_seen = True
            return None
        name = _strip_md(text)
        if name not in parsed.categories:
            parsed.categories.append(name)
        return name

    for i, raw in enumerate(lines):
        if fenced[i]:
            if current is not None:
                body.append(raw)
            continue
        if layout == "heading":
            m = _NUMBERED_HEADING.match(raw)
            if m:
                close(i)
                entry_level = len(m.group(1))
                current = {
                    "number": f"{m.group(2)}{m.group(3).lower()}",
                    "title": _strip_md(m.group(4)),
                    "category": category,
                    "line": i + 1,
                }
                continue
            h = _HEADER.match(raw)
            if h:
                level = len(h.group(1))
                if current is not None and level <= entry_level:
                    close(i)
                if current is None:
                    category = enter_header(level, h.group(2))
                else:
                    body.append(raw)
                continue
            if current is not None:
                body.append(raw)
        elif layout == "list":
            m = _LIST_ITEM.match(raw)
            if m:
                close(i)
                rest = m.group(3)
                b = _BOLD_LEAD.match(rest)
                if b:
                    title, extra = _strip_md(b.group(1)), b.group(2).strip()
                else:
                    title, extra = _strip_md(rest), ""
                current = {
                    "number": f"{m.group(1)}{m.group(2).lower()}",
                    "title": title.rstrip(".:") or title,
                    "category": category,
                    "line": i + 1,
                }
                if extra:
                    body.append(extra)
                continue
            h = _HEADER.match(raw)
            if h:
                close(i)
                category = enter_header(len(h.group(1)), h.group(2))
                continue
            if current is not None:
                if (
                    raw.strip() == ""
                    or raw.startswith((" ", "\t"))
                    or raw.lstrip().startswith(("-", "*", "+"))
                ):
                    body.append(raw)
                else:
                    close(i)
        else:
            h = _HEADER.match(raw)
            if h and len(h.group(1)) >= 2:
                close(i)
                title = _strip_md(h.group(2))
                current = {"number": slugify(title), "title": title, "category": None, "line": i + 1}
                continue
            if current is not None:
                body.append(raw)
    close(len(lines))
    # Unnumbered sections can repeat a slug: keep addresses unique.
    seen: dict[str, int] = {}
    for e in parsed.entries:
        key = e.address.lower()
        if key in seen:
            seen[key] += 1
            e.address = f"{e.address}@{e.line}"
        else:
            seen[key] = 1
    return parsed


def _links(text: str) -> list[str]:
    found: list[str] = []
    for m in list(_MD_LINK.finditer(text)) + list(_CODE_PATH.finditer(text)):
        target = m.group(1)
        if "://" in target or target.startswith("mailto:"):
            continue
        if target not in found:
            found.append(target)
    return found


def read_text_bounded(path: Path) -> str:
    with path.open("rb") as fh:
        data = fh.read(MAX_FILE_BYTES + 1)
    return data[:MAX_FILE_BYTES].decode("utf-8", errors="replace")


def load_project(workspace: Path, constraints_file: Path | None = None) -> ProjectKnowledge:
    """Parse the constraints file and the topic docs it links to (inside the workspace only).

    A missing file is not an error: the result simply holds no entries (and says why in `problems`).
    """
    workspace = Path(workspace)
    main = Path(constraints_file) if constraints_file else constraints_path(workspace)
    pk = ProjectKnowledge(workspace=workspace, constraints_file=main)
    if not main.is_file():
        pk.problems.append(f"no constraints file at {main}")
        return pk
    try:
        parsed = parse_text(read_text_bounded(main), main)
    except OSError as exc:
        pk.problems.append(f"cannot read {main}: {exc}")
        return pk
    pk.files.append(parsed)
    root = workspace.resolve()
    seen = {main.resolve()}
    for target in parsed.links[:MAX_TOPIC_DOCS]:
        doc = (main.parent / target).resolve()
        if doc in seen:
            continue
        seen.add(doc)
        if not doc.is_relative_to(root) and not doc.is_relative_to(main.parent.resolve()):
            pk.problems.append(f"topic doc {target} is outside the workspace; not read")
            continue
        if not doc.is_file():
            pk.problems.append(f"topic doc {target} linked from {main.name} does not exist")
            continue
        try:
            rel = doc.relative_to(root).as_posix()
        except ValueError:
            rel = doc.name
        try:
            pk.files.append(parse_text(read_text_bounded(doc), doc, address_prefix=f"{rel}#"))
        except OSError as exc:
            pk.problems.append(f"cannot read {doc}: {exc}")
    return pk

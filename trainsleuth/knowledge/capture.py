"""Write knowledge back into the project's own files (constraints and fix patterns).

Contract used by the protocol's `capture_knowledge` (issue 3). Writes are atomic (temporary file +
rename in the same folder) and only ever add text: existing content is kept byte for byte.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from pathlib import Path

from trainsleuth.knowledge.constraints import (
    _HEADER,
    _LIST_ITEM,
    _NUMBERED_HEADING,
    parse_text,
)

_WRITE_LOCK = threading.Lock()
_FP_ID = re.compile(r"\bFP-(\d+)\b")
_FP_HEADING = re.compile(r"^(#{2,6})\s+(?:FP-\d+|Fix pattern\b|\d{4}-\d{2}-\d{2})", re.IGNORECASE)


class CaptureError(ValueError):
    """The knowledge cannot be written; the message says why and what to do."""


def _one_line(value: str, name: str, *, required: bool = True) -> str:
    text = " ".join((value or "").split())
    if required and not text:
        raise CaptureError(f"{name} is empty; give a short, specific {name}")
    return text


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read(path: Path) -> str:
    if not path.exists():
        return ""
    if not path.is_file():
        raise CaptureError(f"{path} exists but is not a file; point the knowledge path at a markdown file")
    try:
        with path.open(encoding="utf-8", newline="") as fh:  # keep the file's own line endings
            return fh.read()
    except UnicodeDecodeError as exc:
        raise CaptureError(
            f"{path} is not UTF-8 text ({exc}); fix its encoding before capturing into it"
        ) from exc


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _next_number(numbers: list[str]) -> int:
    values = [int(re.match(r"\d+", n).group(0)) for n in numbers if re.match(r"\d+", n)]  # type: ignore[union-attr]
    return max(values, default=0) + 1


def _category_range(lines: list[str], category: str) -> tuple[int, int, int] | None:
    """(header index, level, end index exclusive) of the category header named `category`."""
    want = category.strip().lower()
    for i, ln in enumerate(lines):
        h = _HEADER.match(ln)
        if not h or _NUMBERED_HEADING.match(ln):
            continue
        title = re.sub(r"[*_`]+", "", h.group(2)).strip().lower()
        if title == want:
            level = len(h.group(1))
            end = len(lines)
            for j in range(i + 1, len(lines)):
                hj = _HEADER.match(lines[j])
                if hj and len(hj.group(1)) <= level and not _NUMBERED_HEADING.match(lines[j]):
                    end = j
                    break
            return i, level, end
    return None


def _insert_block(lines: list[str], at: int, block: list[str], *, tight: bool = False) -> list[str]:
    """Insert `block` at index `at`, separated by one blank line before (none when `tight`, as in a
    list without blank lines between items) and one after."""
    before = lines[:at]
    after = lines[at:]
    while before and not before[-1].strip():
        before.pop()
    out = before + ([""] if before and not tight else []) + block
    if after:
        while after and not after[0].strip():
            after.pop(0)
        out += ["", *after]
    return out


def append_constraint(
    constraints_file: Path, *, title: str, rule: str, details: list[str], category: str | None = None
) -> str:
    """Append a constraint in the file's own layout with the next number; return that number (e.g. "12").

    With `category`, the entry goes at the end of that category's section (created at the end of the
    file if missing). A missing file is created in the heading layout.
    """
    path = Path(constraints_file)
    title = _one_line(title, "title").rstrip(".")
    rule = _one_line(rule, "rule", required=False)
    details = [_one_line(d, "detail") for d in details if d and d.strip()]
    cat = _one_line(category, "category") if category and category.strip() else None
    with _WRITE_LOCK:
        text = _read(path)
        nl = _newline(text)
        lines = text.splitlines()
        parsed = parse_text(text, path)
        number = str(_next_number([e.number for e in parsed.entries]))
        layout = parsed.layout or "heading"
        if layout == "heading":
            block = _heading_block(lines, number, title, rule, details)
        else:
            block = _list_block(lines, number, title, rule, details)

        if not lines:
            lines = ["# Project constraints"]
        tight_list = layout == "list" and _list_is_tight(lines)
        if cat:
            rng = _category_range(lines, cat)
            if rng is None:
                level = _category_level(lines)
                lines = _insert_block(lines, len(lines), [f"{'#' * level} {cat}"])
                lines = _insert_block(lines, len(lines), block, tight=tight_list)
            else:
                _, _, end = rng
                lines = _insert_block(lines, end, block, tight=tight_list and _ends_in_list(lines[:end]))
        else:
            lines = _insert_block(lines, len(lines), block, tight=tight_list and _ends_in_list(lines))
        _atomic_write(path, nl.join(lines) + nl)
    return number


def _list_is_tight(lines: list[str]) -> bool:
    """True when numbered items follow each other (or a header) without blank lines."""
    for i, ln in enumerate(lines[1:], 1):
        if _LIST_ITEM.match(ln):
            return bool(lines[i - 1].strip())
    return False


def _ends_in_list(lines: list[str]) -> bool:
    content = [ln for ln in lines if ln.strip()]
    if not content:
        return False
    last = content[-1]
    return bool(_LIST_ITEM.match(last) or re.match(r"^\s+\S", last))


def _category_level(lines: list[str]) -> int:
    levels = [len(h.group(1)) for ln in lines if (h := _HEADER.match(ln)) and not _NUMBERED_HEADING.match(ln)]
    levels = [lv for lv in levels if lv > 1]
    return min(levels, default=2)


def _heading_block(lines: list[str], number: str, title: str, rule: str, details: list[str]) -> list[str]:
    levels = [len(m.group(1)) for ln in lines if (m := _NUMBERED_HEADING.match(ln))]
    level = max(set(levels), key=levels.count) if levels else 3
    sep = "."
    for ln in lines:
        m = _NUMBERED_HEADING.match(ln)
        if m:
            sep = ln[len(m.group(1)) :].lstrip()[len(m.group(2)) + len(m.group(3))]
            break
    uses_rule_label = any(re.match(r"^\*\*Rule:?\*\*:?", ln.strip()) for ln in lines)
    block = [f"{'#' * level} {number}{sep} {title}", ""]
    if rule:
        block.append(f"**Rule:** {rule}" if uses_rule_label else rule)
    if details:
        if rule:
            block.append("")
        bullet = _bullet_style(lines, default="- ")
        block += [f"{bullet}{d}" for d in details]
    while block and not block[-1]:
        block.pop()
    return block


def _bullet_style(lines: list[str], *, default: str) -> str:
    for ln in lines:
        m = re.match(r"^(\s*)([-*+])\s+\S", ln)
        if m and not ln.strip().startswith("**"):
            return f"{m.group(2)} "
    return default


def _list_block(lines: list[str], number: str, title: str, rule: str, details: list[str]) -> list[str]:
    sep = "."
    indent = "   "
    for ln in lines:
        m = _LIST_ITEM.match(ln)
        if m:
            sep = ln[len(m.group(1)) + len(m.group(2))]
            break
    for ln in lines:
        m = re.match(r"^(\s+)[-*+]\s+\S", ln)
        if m:
            indent = m.group(1)
            break
    bullet = "-"
    for ln in lines:
        m = re.match(r"^\s+([-*+])\s+\S", ln)
        if m:
            bullet = m.group(1)
            break
    head = f"{number}{sep} **{title}.**"
    if rule and rule.rstrip(".").lower() != title.lower():
        head += f" {rule}"
    return [head] + [f"{indent}{bullet} {d}" for d in details]


# ---------------------------------------------------------------------------- fix patterns


def append_fix_pattern(
    patterns_file: Path,
    *,
    date: str,
    symptom: str,
    root_cause: str,
    fix: str,
    lesson: str,
    related_constraint: str | None = None,
) -> str:
    """Append a fix-pattern record (Date, Symptom, Root Cause, Fix, Lesson, Related Constraint); return its id."""
    path = Path(patterns_file)
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", (date or "").strip()):
        raise CaptureError(f"date {date!r} is not YYYY-MM-DD; pass the date as e.g. 2026-01-31")
    fields = {
        "Date": date.strip(),
        "Symptom": _one_line(symptom, "symptom"),
        "Root Cause": _one_line(root_cause, "root cause"),
        "Fix": _one_line(fix, "fix"),
        "Lesson": _one_line(lesson, "lesson"),
        "Related Constraint": _one_line(related_constraint or "", "related constraint", required=False)
        or "none",
    }
    with _WRITE_LOCK:
        text = _read(path)
        nl = _newline(text)
        lines = text.splitlines()
        existing = [int(n) for n in _FP_ID.findall(text)]
        count = sum(1 for ln in lines if _FP_HEADING.match(ln))
        number = max(max(existing, default=0), count) + 1
        pattern_id = f"FP-{number:03d}"
        level = 2
        for ln in lines:
            m = _FP_HEADING.match(ln)
            if m:
                level = len(m.group(1))
                break
        short = fields["Symptom"] if len(fields["Symptom"]) <= 70 else fields["Symptom"][:67].rstrip() + "..."
        block = [f"{'#' * level} {pattern_id}: {short}", ""]
        block += [f"- **{k}:** {v}" for k, v in fields.items()]
        if not lines:
            lines = ["# Fix patterns", "", "Records of problems solved in this project, newest last."]
        lines = _insert_block(lines, len(lines), block)
        _atomic_write(path, nl.join(lines) + nl)
    return pattern_id


_FIELD = re.compile(
    r"^\s*[-*]?\s*\*\*(Date|Symptom|Root Cause|Fix|Lesson|Related Constraint):?\*\*:?\s*(.*)$", re.I
)


def parse_fix_patterns(text: str) -> list[dict[str, str]]:
    """Records of a project's fix-pattern file: dicts with id, title and the six fields (when present)."""
    records: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    for ln in text.splitlines():
        h = _HEADER.match(ln)
        if h and len(h.group(1)) >= 2:
            if current is not None:
                records.append(current)
            title = h.group(2).strip()
            m = _FP_ID.search(title)
            current = {"id": f"FP-{int(m.group(1)):03d}" if m else "", "title": title}
            continue
        f = _FIELD.match(ln)
        if f and current is not None:
            key = f.group(1).lower().replace(" ", "_")
            current[key] = f.group(2).strip()
    if current is not None:
        records.append(current)
    out = [r for r in records if any(k in r for k in ("symptom", "fix", "root_cause"))]
    for i, r in enumerate(out, 1):
        if not r["id"]:
            r["id"] = f"FP-{i:03d}"
    return out

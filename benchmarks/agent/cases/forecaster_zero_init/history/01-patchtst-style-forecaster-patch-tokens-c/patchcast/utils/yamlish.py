"""A small YAML subset loader so the package needs nothing beyond torch.

Supports what our configs use: nested block mappings (two-space indent), block lists (``- item``),
flow lists (``[a, b]``), comments, quoted strings, ints, floats, booleans and null. Anything else
raises ``ValueError`` with the line number rather than guessing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_INT = re.compile(r"^[-+]?\d+$")
_FLOAT = re.compile(r"^[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$")


def parse_scalar(text: str) -> Any:
    text = text.strip()
    if text == "" or text in ("~", "null", "None"):
        return None
    if text[0] in "'\"" and text[-1] == text[0] and len(text) >= 2:
        return text[1:-1]
    if text.lower() in ("true", "yes", "on"):
        return True
    if text.lower() in ("false", "no", "off"):
        return False
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return [parse_scalar(part) for part in _split_flow(inner)] if inner else []
    return text


def _split_flow(text: str) -> list[str]:
    parts, depth, current, quote = [], 0, [], None
    for ch in text:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts]


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def loads(text: str) -> Any:
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw)
        if line.strip() in ("", "---"):
            continue
        if "\t" in line[: len(line) - len(line.lstrip())]:
            raise ValueError(f"line {number}: tabs are not allowed for indentation")
        lines.append((number, len(line) - len(line.lstrip(" ")), line.strip()))
    if not lines:
        return {}
    value, pos = _block(lines, 0, lines[0][1])
    if pos != len(lines):
        raise ValueError(f"line {lines[pos][0]}: unexpected indentation")
    return value


def _block(lines: list[tuple[int, int, str]], pos: int, indent: int) -> tuple[Any, int]:
    if lines[pos][2].startswith("- ") or lines[pos][2] == "-":
        items: list[Any] = []
        while pos < len(lines) and lines[pos][1] == indent and lines[pos][2].startswith("-"):
            number, _, text = lines[pos]
            rest = text[1:].strip()
            pos += 1
            if rest:
                items.append(parse_scalar(rest))
            elif pos < len(lines) and lines[pos][1] > indent:
                value, pos = _block(lines, pos, lines[pos][1])
                items.append(value)
            else:
                items.append(None)
        return items, pos
    mapping: dict[str, Any] = {}
    while pos < len(lines) and lines[pos][1] == indent:
        number, _, text = lines[pos]
        if ":" not in text:
            raise ValueError(f"line {number}: expected 'key: value', got {text!r}")
        key, _, rest = text.partition(":")
        key = key.strip().strip("'\"")
        pos += 1
        if rest.strip():
            mapping[key] = parse_scalar(rest)
        elif pos < len(lines) and lines[pos][1] > indent:
            mapping[key], pos = _block(lines, pos, lines[pos][1])
        else:
            mapping[key] = None
    if pos < len(lines) and lines[pos][1] > indent:
        raise ValueError(f"line {lines[pos][0]}: unexpected indentation")
    return mapping, pos


def load(path: str | Path) -> Any:
    return loads(Path(path).read_text(encoding="utf-8"))

"""A client's JSON config file, read and written without losing anything: JSON with comments
(VS Code), a refusal that changes nothing when the file cannot be understood, timestamped
backups, and atomic writes that keep the file's permissions.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class InstallError(Exception):
    """The installer refuses (usage problem or unreadable config); the message says what to do."""


def strip_jsonc(text: str) -> str:
    """Remove // and /* */ comments (outside strings) and trailing commas: VS Code's JSONC."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
            continue
        if c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def read_json_object(path: Path, *, allow_comments: bool = False) -> tuple[dict[str, Any], str | None]:
    """Return (object, original text); a missing or empty file is an empty object."""
    if not path.exists():
        return {}, None
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise InstallError(f"cannot read {path}: {exc}") from exc
    if not text.strip():
        return {}, text
    try:
        data = json.loads(text)
    except json.JSONDecodeError as first:
        if not allow_comments:
            raise InstallError(
                f"{path} is not valid JSON ({first}); fix or move the file, then run the installer again "
                "(nothing was changed)"
            ) from first
        try:
            data = json.loads(strip_jsonc(text))
        except json.JSONDecodeError as exc:
            raise InstallError(
                f"{path} is not valid JSON with comments ({exc}); fix or move the file, then run the "
                "installer again (nothing was changed)"
            ) from exc
    if not isinstance(data, dict):
        raise InstallError(f"{path} holds a JSON {type(data).__name__}, not an object; nothing was changed")
    return data, text


def dump_json(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def section(data: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = data.setdefault(key, {})
    if not isinstance(value, dict):
        raise InstallError(
            f"{path}: '{key}' is a {type(value).__name__}, expected an object; nothing was changed"
        )
    return value


def has_comments(text: str) -> bool:
    return strip_jsonc(text) != re.sub(r",(\s*[}\]])", r"\1", text)


def backup_path(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.bak-{stamp}-{n}")
        n += 1
    return candidate


def atomic_write(path: Path, text: str, private: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.trainsleuth-tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    try:
        if private:
            os.chmod(tmp, 0o600)
        elif path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()

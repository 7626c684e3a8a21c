"""Tool results that stay cheap in a client's context: both channels bounded.

Clients differ in what they give the model: some the text, some (Claude Code, VS Code) the
`structuredContent`. Both are bounded (20,000 characters by default). A structured result over
the bound is written whole to `.trainsleuth/results/NAME.json` in the workspace and returned cut
to size, with what was cut, the file's path and a `resource_link` to `result://NAME` (readable
through MCP by clients without file access).
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

from mcp_types import CallToolResult, ImageContent, ResourceLink, TextContent

RESULTS_DIR = "results"
RESULT_URI = "result://{name}"
_NAME_OK = re.compile(r"^[A-Za-z0-9_.-]+\.json$")
_NOTE_ROOM = 1500  # room kept for the pointer to the full result
_KEEP_WHOLE = 200  # values smaller than this are never cut
KEEP_RESULTS = 200  # stored full results kept per workspace (oldest removed first)


def bound_text(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    note = (
        f"\n… [truncated: {len(text) - limit} more characters; the structured output has the data, "
        "and list fields are paginated with a cursor]"
    )
    return text[: max(0, limit - len(note))] + note


def _size(value: Any) -> int:
    return len(json.dumps(value, default=str))


def shrink(value: Any, budget: int, path: str, notes: list[str]) -> Any:
    """Cut `value` to at most `budget` serialized characters, largest parts first; note every cut.

    Small values (ids, paths, verdicts) are kept whole; long lists keep their first items.
    """
    out = _shrink(value, budget, path, notes)
    for _ in range(6):  # the estimate is close but not exact: tighten until it fits
        over = _size(out) - budget
        if over <= 0:
            break
        notes.clear()
        out = _shrink(value, budget - over - 64, path, notes)
    return out


def _shrink(value: Any, budget: int, path: str, notes: list[str]) -> Any:
    size = _size(value)
    if size <= budget:
        return value
    if isinstance(value, str):
        keep = max(0, budget - 40)
        notes.append(f"{path or 'result'}: first {keep} of {len(value)} characters")
        return value[:keep] + "…"
    if isinstance(value, list):
        out: list[Any] = []
        used = 2
        for item in value:
            cost = _size(item) + 2
            if used + cost > budget:
                if not out and budget - used > 60:
                    out.append(_shrink(item, budget - used, f"{path}[0]", notes))
                break
            out.append(item)
            used += cost
        notes.append(f"{path or 'result'}: first {len(out)} of {len(value)} items")
        return out
    if isinstance(value, dict):
        sizes = {k: _size(v) for k, v in value.items()}
        over = size - budget
        out_d = dict(value)
        for key in sorted(sizes, key=lambda k: -sizes[k]):
            if over <= 0 or sizes[key] < _KEEP_WHOLE:
                break
            target = max(sizes[key] - over, 60)
            child = f"{path}.{key}" if path else str(key)
            out_d[key] = _shrink(value[key], target, child, notes)
            over -= sizes[key] - _size(out_d[key])
        return out_d
    return value


def results_dir(state_dir: Path) -> Path:
    return state_dir / RESULTS_DIR


def read_result(state_dir: Path, name: str) -> str:
    """The text of a spilled result, for the `result://NAME` resource (names only, no paths)."""
    if not _NAME_OK.match(name):
        raise FileNotFoundError(name)
    return (results_dir(state_dir) / name).read_text(encoding="utf-8")


def _spill(tool: str, structured: dict[str, Any], state_dir: Path) -> tuple[str, Path]:
    from trainsleuth.state.store import ensure_state_dir

    ensure_state_dir(state_dir)
    folder = results_dir(state_dir)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{tool}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}.json"
    path = folder / name
    path.write_text(json.dumps(structured, default=str), encoding="utf-8")
    _prune(folder)
    return name, path


def _prune(folder: Path, keep: int = KEEP_RESULTS) -> None:
    """Keep the newest `keep` stored results (they are for reading right after the call)."""
    try:
        files = sorted(folder.glob("*.json"), key=lambda f: f.stat().st_mtime, reverse=True)
        for old in files[keep:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass


def build_result(
    tool: str,
    structured: dict[str, Any],
    text: str,
    images: list[bytes] | list[str],
    *,
    state_dir: Path,
    max_text_chars: int,
    max_structured_chars: int,
) -> CallToolResult:
    """A successful result with both channels bounded; an oversized structured part goes to a file."""
    content: list[Any] = []
    size = _size(structured)
    if size > max_structured_chars:
        name, path = _spill(tool, structured, state_dir)
        notes: list[str] = []
        small = shrink(structured, max(1000, max_structured_chars - _NOTE_ROOM), "", notes)
        uri = RESULT_URI.format(name=name)
        small["full_result"] = {"uri": uri, "path": str(path), "characters": size, "cut": notes[:12]}
        pointer = (
            f"\nThe full result ({size} characters) is in {path} (resource {uri}); the structured "
            f"result here is cut to fit: {'; '.join(notes[:6])}."
        )
        text = bound_text(text, max_text_chars - len(pointer)) + pointer
        structured = small
        content.append(TextContent(type="text", text=text))
        content.append(
            ResourceLink(
                type="resource_link",
                uri=uri,
                name=name,
                description=f"Full result of {tool} ({size} characters of JSON)",
                mime_type="application/json",
            )
        )
    else:
        content.append(TextContent(type="text", text=bound_text(text, max_text_chars)))
    for png in images:
        data = png if isinstance(png, str) else base64.b64encode(png).decode()
        content.append(ImageContent(type="image", data=data, mime_type="image/png"))
    return CallToolResult(content=content, structured_content=structured)


def error_result(message: str, next_step: str | None = None) -> CallToolResult:
    text = message if not next_step else f"{message}\nNext step: {next_step}"
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


__all__ = ["bound_text", "build_result", "error_result", "read_result", "shrink"]

"""What a client can learn from a tool's published input schema alone: each argument with its
type, bounds, enum values and default, and an example call that the server accepts.

Used by `trainsleuth client describe TOOL` and by the test that builds a call for every tool
from its schema. Pure JSON-schema functions: no server, no MCP.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

# Example values for common argument names; anything else is built from the type and bounds.
_NAMED_EXAMPLES: dict[str, Any] = {
    "entrypoint": "train.py:make_probe",
    "path": "train.log",
    "run_dir": "runs/probe",
    "repo": ".",
    "good": "HEAD~10",
    "bad": "HEAD",
    "command": "python -m pytest -x tests/test_train.py",
    "reproducer": "python -m pytest -x tests/test_train.py",
    "package": "pandas",
    "versions": ["2.2.3", "3.0.0"],
    "investigation_id": "inv-0123abcd",
    "job_id": "job-0123456789ab",
    "a": "checkpoints/step_100.pt",
    "b": "checkpoints/step_200.pt",
    "query": "loss becomes NaN after a few hundred steps with fp16",
    "symptom": "loss becomes NaN after ~300 steps",
}


def describe_type(prop: dict[str, Any]) -> str:
    """'integer from 1 to 500', 'one of "a", "b"', 'list of string (>= 2 items)'."""
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return f"exactly {json.dumps(prop['const'])}"
    if "anyOf" in prop:
        return " or ".join(describe_type(arm) for arm in prop["anyOf"])
    kind = prop.get("type", "any")
    if kind == "array":
        items = prop.get("items") or {}
        inner = describe_type(items) if items else "any"
        bounds = _bounds(prop.get("minItems"), prop.get("maxItems"), None, None)
        return f"list of {inner}" + (f" ({bounds} items)" if bounds else "")
    if kind == "object":
        req = prop.get("required") or []
        return (
            "object {" + ", ".join(f"{n}{'*' if n in req else ''}" for n in prop.get("properties", {})) + "}"
        )
    if kind == "string":
        bounds = _bounds(prop.get("minLength"), prop.get("maxLength"), None, None)
        return "string" + (f" ({bounds} characters)" if bounds else "")
    bounds = _bounds(
        prop.get("minimum"), prop.get("maximum"), prop.get("exclusiveMinimum"), prop.get("exclusiveMaximum")
    )
    return f"{kind} {bounds}".strip()


def _bounds(lo: Any, hi: Any, xlo: Any, xhi: Any) -> str:
    if lo is not None and hi is not None:
        return f"{lo:g} to {hi:g}"
    parts = []
    if lo is not None:
        parts.append(f">= {lo:g}")
    if xlo is not None:
        parts.append(f"> {xlo:g}")
    if hi is not None:
        parts.append(f"<= {hi:g}")
    if xhi is not None:
        parts.append(f"< {xhi:g}")
    return ", ".join(parts)


# Where a tool's minimal call would mislead (an argument named like another tool's, or a call that
# needs one of several optional arguments), the example shows the form that works; used only where
# the schema has those arguments and accepts the values.
_TOOL_EXAMPLES: dict[str, dict[str, Any]] = {
    "compare_runs": {"good": "logs/good.log", "bad": "logs/bad.log"},
    "diff_checkpoints": {"b": "checkpoints/step_200.pt"},
    "dump_stacks": {"pattern": "train.py"},
    "probe_gradients": {"command": "python train.py"},  # the user's own command first (probe://entrypoint)
    "compare_precision": {"command": "python train.py"},
    "check_distributed": {"command": "torchrun --standalone --nproc_per_node 2 train.py"},
}


def example_value(name: str, prop: dict[str, Any]) -> Any:
    """A value the schema accepts for `name` (a named example when it fits the schema)."""
    named = _NAMED_EXAMPLES.get(name)
    if named is not None and _fits(named, prop):
        return named
    if "enum" in prop:
        return prop["enum"][0]
    if "const" in prop:
        return prop["const"]
    if "anyOf" in prop:
        return example_value(name, prop["anyOf"][0])
    kind = prop.get("type")
    if kind == "boolean":
        return bool(prop.get("default", False))
    if kind in ("integer", "number"):
        return _example_number(prop, integer=kind == "integer")
    if kind == "array":
        items = prop.get("items") or {"type": "string"}
        count = max(1, int(prop.get("minItems", 1)))
        values = [example_value(name.rstrip("s") or name, items) for _ in range(count)]
        if all(isinstance(v, str) for v in values):
            values = [f"{v}{i + 1}" if count > 1 else v for i, v in enumerate(values)]
        return values
    if kind == "object":
        return example_arguments(prop)
    text = "example"
    lo = int(prop.get("minLength", 0))
    return text if len(text) >= lo else text + "x" * (lo - len(text))


def _example_number(prop: dict[str, Any], *, integer: bool) -> float | int:
    if "default" in prop:
        return prop["default"]
    value: float = 1
    if "minimum" in prop:
        value = max(value, prop["minimum"]) if prop["minimum"] > 0 else prop["minimum"]
    if "exclusiveMinimum" in prop and value <= prop["exclusiveMinimum"]:
        value = prop["exclusiveMinimum"] + 1
    if "maximum" in prop and value > prop["maximum"]:
        value = prop["maximum"]
    return int(value) if integer else value


def _fits(value: Any, prop: dict[str, Any]) -> bool:
    kind = prop.get("type")
    if "enum" in prop:
        return value in prop["enum"]
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list) and len(value) >= int(prop.get("minItems", 0))
    return False


def example_arguments(schema: dict[str, Any], tool: str | None = None) -> dict[str, Any]:
    """The smallest call the schema accepts: every required argument, nothing else (with `tool`,
    the values and arguments that tool's call needs to work, see _TOOL_EXAMPLES)."""
    props = schema.get("properties", {})
    out = {name: example_value(name, props.get(name, {})) for name in schema.get("required", [])}
    for name, value in _TOOL_EXAMPLES.get(tool or "", {}).items():
        if name in props and _fits(value, props[name]):
            out[name] = value
    return out


def example_command(tool: str, arguments: dict[str, Any]) -> str:
    parts = ["trainsleuth", "client", "call", tool]
    for key, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value)
        parts += ["--arg", f"{key}={text}"]
    return shlex.join(parts)


def describe_tool(name: str, description: str, schema: dict[str, Any], annotations: dict[str, Any]) -> str:
    """A reference card for one tool, from what tools/list publishes."""
    lines = [f"{name}: {description}"]
    hints = _hints(annotations)
    if hints:
        lines.append(f"  ({hints})")
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    lines.append("arguments (* = required):" if props else "arguments: none")
    width = max((len(n) for n in props), default=0)
    for pname, prop in props.items():
        mark = "*" if pname in required else " "
        kind = describe_type(prop)
        if "default" in prop:
            kind += f"; default {json.dumps(prop['default'])}"
        desc = prop.get("description", "")
        lines.append(f"  {mark} {pname.ljust(width)}  {kind}" + (f"  - {desc}" if desc else ""))
        if prop.get("type") == "object" or (prop.get("items") or {}).get("type") == "object":
            inner = prop if prop.get("type") == "object" else prop["items"]
            for sub, sprop in inner.get("properties", {}).items():
                smark = "*" if sub in set(inner.get("required", [])) else " "
                sdesc = sprop.get("description", "")
                lines.append(
                    f"      {smark} {pname}.{sub}  {describe_type(sprop)}" + (f"  - {sdesc}" if sdesc else "")
                )
    example = example_arguments(schema, name)
    lines.append("example:")
    lines.append(f"  {example_command(name, example)}")
    lines.append(f"  arguments as JSON: {json.dumps(example)}")
    return "\n".join(lines)


def _hints(annotations: dict[str, Any]) -> str:
    """The four hints with the MCP defaults applied to the ones left out."""
    read_only = annotations.get("readOnlyHint", False)
    destructive = annotations.get("destructiveHint", True)
    idempotent = annotations.get("idempotentHint", False)
    open_world = annotations.get("openWorldHint", True)
    if read_only:
        words = ["read-only"]
    else:
        words = ["runs code or changes files" if destructive else "only adds state"]
        if idempotent:
            words.append("idempotent")
    words.append("reaches the network" if open_world else "offline")
    return ", ".join(words)


__all__ = ["describe_tool", "describe_type", "example_arguments", "example_command", "example_value"]

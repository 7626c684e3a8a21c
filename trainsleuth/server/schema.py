"""What a client sees of a tool's arguments, and what it is told when it gets them wrong.

`published_schema` turns a pydantic input model into the JSON schema every client can use:
every `$ref` inlined, no generated `title` keys, no `null` defaults or `anyOf [T, null]` arms
(an optional field is simply not required), no obvious defaults (false, "", []), every bound
and enum kept. `check_arguments`
validates a call's raw arguments *before* anything drops them: an unknown name is refused
with the closest valid one, and every problem (missing fields, enums, ranges, nested fields)
is reported at once on one line.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError

from trainsleuth.tools.names import close_names, closest

_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


# Defaults a client assumes anyway for an optional argument it leaves out: not worth publishing.
def _obvious(value: Any) -> bool:
    return value is None or value is False or (isinstance(value, (str, list, dict)) and not value)


_SCHEMA_DICTS = ("items", "additionalProperties", "not", "contains")


def published_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The portable input schema of a tool: self-contained, small, with every constraint."""
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})
    return _prune(raw, defs, depth=0)


def _prune(schema: Any, defs: dict[str, Any], depth: int) -> Any:
    if not isinstance(schema, dict):
        return schema
    if depth > 20:  # a recursive model: publish it as an open object rather than loop
        return {"type": "object"}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = _prune(defs[ref.removeprefix("#/$defs/")], defs, depth + 1)
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**target, **_prune(siblings, defs, depth + 1)}
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("title", "additionalProperties") and not isinstance(value, dict):
            continue  # unknown names are refused by the server itself, with the closest valid one
        if key == "default" and _obvious(value):
            continue
        if key == "properties":
            out[key] = {name: _prune(sub, defs, depth + 1) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS:
            out[key] = [_prune(sub, defs, depth + 1) for sub in value]
        elif key in _SCHEMA_DICTS and isinstance(value, dict):
            out[key] = _prune(value, defs, depth + 1)
        elif isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
            out[key] = int(value)  # 300.0 -> 300: the same number to JSON Schema, shorter
        else:
            out[key] = value
    arms = out.get("anyOf")
    if isinstance(arms, list):
        real = [a for a in arms if a != {"type": "null"}]
        if len(real) < len(arms):
            # Optional: not required, so null adds nothing a client needs (null is still accepted).
            rest = {k: v for k, v in out.items() if k != "anyOf"}
            out = {**real[0], **rest} if len(real) == 1 else {**rest, "anyOf": real}
    return out


# ---------------------------------------------------------------------------- constraint descriptions


def describe_constraint(prop: dict[str, Any]) -> str:
    """A short human description of what a property accepts: 'integer 1..500', 'one of a, b'."""
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return f"exactly {json.dumps(prop['const'])}"
    if "anyOf" in prop:
        return " or ".join(describe_constraint(a) for a in prop["anyOf"])
    kind = prop.get("type", "any value")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    bounds = _bounds(prop)
    if kind == "array":
        items = prop.get("items") or {}
        inner = describe_constraint(items) if items else "items"
        return f"a list of {inner}" + (f" ({bounds} items)" if bounds else "")
    if kind == "string" and bounds:
        return f"a string of {bounds} characters"
    article = "an" if kind[:1] in "aeiou" else "a"
    return f"{article} {kind} {bounds}".strip()


def _bounds(prop: dict[str, Any]) -> str:
    lo = prop.get("minimum", prop.get("minLength", prop.get("minItems")))
    hi = prop.get("maximum", prop.get("maxLength", prop.get("maxItems")))
    xlo, xhi = prop.get("exclusiveMinimum"), prop.get("exclusiveMaximum")
    if lo is not None and hi is not None:
        return f"from {lo:g} to {hi:g}"
    parts = []
    if lo is not None:
        parts.append(f">= {lo:g}")
    if xlo is not None:
        parts.append(f"> {xlo:g}")
    if hi is not None:
        parts.append(f"<= {hi:g}")
    if xhi is not None:
        parts.append(f"< {xhi:g}")
    return " and ".join(parts)


# ---------------------------------------------------------------------------- argument checking


def _unknown_names(
    arguments: dict[str, Any], model: type[BaseModel], where: str, problems: list[str]
) -> None:
    fields = model.model_fields
    valid = list(fields)
    unknown = []
    for key, value in arguments.items():
        if key not in fields:
            hints = close_names(key, valid)
            did = f" (did you mean {' or '.join(repr(h) for h in hints)}?)" if hints else ""
            unknown.append(f"{where}{key}{did}")
            continue
        sub = _nested_model(fields[key].annotation)
        if sub is None:
            continue
        if isinstance(value, dict):
            _unknown_names(value, sub, f"{where}{key}.", problems)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    _unknown_names(item, sub, f"{where}{key}[{i}].", problems)
    if unknown:
        scope = f" of {where[:-1]}" if where else ""
        problems.insert(
            0,
            f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; valid{scope}: {', '.join(valid)}",
        )


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    from typing import get_args

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _nested_model(arg)
        if found is not None:
            return found
    return None


def _pre_parse(arguments: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Accept a list or object sent as a JSON string (some clients do that for nested values), one string
    where a list of strings is expected as a list of one (two blind benchmark runs sent `lessons` so), and a
    number or boolean where text is expected as its JSON text (`--arg command=true` means "true")."""
    props = schema.get("properties", {})
    out = dict(arguments)
    for key, value in arguments.items():
        kind = props.get(key, {}).get("type")
        if kind == "string" and isinstance(value, (bool, int, float)):
            out[key] = json.dumps(value)
            continue
        if isinstance(value, str) and kind in ("array", "object") and value.strip()[:1] in ("[", "{"):
            try:
                out[key] = json.loads(value)
            except json.JSONDecodeError:
                pass
            continue
        # One plain sentence where a list of sentences is expected (`--arg lessons=...`): a list of one.
        if isinstance(value, str) and kind == "array" and props[key].get("items", {}).get("type") == "string":
            out[key] = [value]
    return out


def _prop_at(schema: dict[str, Any], loc: tuple[Any, ...]) -> dict[str, Any]:
    node: dict[str, Any] = schema
    for part in loc:
        node = node.get("items", {}) if isinstance(part, int) else node.get("properties", {}).get(part, {})
        if not isinstance(node, dict):
            return {}
    return node


def _loc(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _error_line(err: Any, schema: dict[str, Any]) -> tuple[str, str | None]:
    """One problem as text, or ('missing', name) for missing fields (reported together)."""
    # pydantic puts union-arm and function names into loc for some errors; keep real field names only.
    loc = tuple(p for p in err["loc"] if isinstance(p, int) or not str(p).startswith(("function-", "list[")))
    where = _loc(loc) or "arguments"
    kind = err["type"]
    ctx = err.get("ctx") or {}
    got = f" (got {_short(err.get('input'))})" if kind != "missing" else ""
    if kind == "missing":
        prop = _prop_at(schema, loc)
        needs = prop.get("required") if prop.get("type") == "object" else None
        return "missing", where + (f" {{{', '.join(needs)}}}" if needs else "")
    if kind == "extra_forbidden":
        return f"{where}: unknown argument", None
    prop = _prop_at(schema, loc)
    if kind in ("literal_error", "enum"):
        allowed = describe_constraint(prop) if prop else ctx.get("expected", "")
        return f"{where}: must be {allowed}{got}", None
    comparisons = {
        "greater_than_equal": (">=", "ge"),
        "greater_than": (">", "gt"),
        "less_than_equal": ("<=", "le"),
        "less_than": ("<", "lt"),
    }
    if kind in comparisons:
        op, key = comparisons[kind]
        allowed = describe_constraint(prop) if prop else f"{op} {ctx.get(key)}"
        return f"{where}: must be {allowed}{got}", None
    if kind in ("too_short", "string_too_short"):
        return f"{where}: needs at least {ctx.get('min_length')} {_unit(kind)}{got}", None
    if kind in ("too_long", "string_too_long"):
        return f"{where}: allows at most {ctx.get('max_length')} {_unit(kind)}{got}", None
    allowed = f" (allowed: {describe_constraint(prop)})" if prop else ""
    return f"{where}: {err['msg'][0].lower()}{err['msg'][1:]}{allowed}{got}", None


def _unit(kind: str) -> str:
    return "characters" if kind.startswith("string") else "items"


def check_arguments(
    tool: str, model: type[BaseModel], schema: dict[str, Any], arguments: dict[str, Any]
) -> tuple[BaseModel | None, dict[str, Any], str | None]:
    """Validate raw call arguments: (validated model, arguments as parsed, None) or (None, args, message).

    The message lists every problem at once on one line, each naming the field and what it accepts.
    """
    arguments = _pre_parse(arguments, schema)
    problems: list[str] = []
    _unknown_names(arguments, model, "", problems)
    missing: list[str] = []
    try:
        validated = model.model_validate(arguments)
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            line, name = _error_line(err, schema)
            if line == "missing" and name is not None:
                missing.append(name)
            elif not (err["type"] == "extra_forbidden" and problems):  # unknown names already explained
                problems.append(line)
        validated = None
    if missing:
        problems.insert(0, "missing required: " + ", ".join(missing))
    if not problems:
        return validated, arguments, None
    return None, arguments, f"Invalid arguments for {tool}: " + "; ".join(dict.fromkeys(problems)) + "."


__all__ = ["check_arguments", "close_names", "closest", "describe_constraint", "published_schema"]

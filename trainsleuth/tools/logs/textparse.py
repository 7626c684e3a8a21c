"""Line parsers for text logs. Every function takes one decoded line and returns records;
none of them raises on any input (property-tested).

A record is `(step or None, {metric name: float})`.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

Record = tuple["float | None", dict[str, float]]

NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_NUM_RE = re.compile(rf"^\s*({NUM}|[-+]?(?:nan|inf(?:inity)?))\s*(%|ms|s|it/s|s/it)?\s*$", re.I)
_RANK_PREFIX = re.compile(r"^\s*(?:\[(?:default|rank|Rank|RANK)?\s*\d+\]\s*:?|\d+\s*:|rank\s*\d+\s*:)\s*")
_QUOTE_PREFIX = re.compile(r"^\s*(?:>\s*)+")

_MEGATRON = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_MEGATRON_VAL = re.compile(
    r"\b(validation|evaluation|test)\s+loss\s+at\s+(?:iteration|step)\s+(\d+)\s*\|", re.I
)
_NANOGPT_ITER = re.compile(r"^\s*iter\s+(\d+)\s*:\s*(.*)$")
_NANOGPT_STEP = re.compile(r"^\s*step\s+(\d+)\s*:\s*(.*)$")
_SPACE_KV = re.compile(
    rf"([A-Za-z_][\w./\-]*(?:\s+[A-Za-z_][\w./\-]*)?)\s*[:=]?\s+({NUM}|nan|inf)(?:\s*(%|ms|s))?(?=[\s,;|]|$)",
    re.I,
)
_KV = re.compile(
    rf"([A-Za-z_][\w./\-\[\]]*)\s*[=:]\s*({NUM}|[-+]?nan|[-+]?inf)(?=[\s,;|)\]}}]|%|ms\b|s\b|$)", re.I
)
_DICT_ITEM = re.compile(
    rf"""['"]([^'"]+)['"]\s*:\s*(?:np\.float\d*\(|tensor\()?\s*({NUM}|[-+]?nan|[-+]?inf(?:inity)?|NaN|-?Infinity)""",
    re.I,
)
_TQDM = re.compile(r"(\d+)/(\d+)\s*\[[^\]]*?(?:,\s*([\d.]+)\s*(it/s|s/it))?\s*(?:,\s*(.*?))?\]")
_TQDM_EPOCH = re.compile(r"\b[Ee]poch\s*(\d+)\b")
_PART_KV = re.compile(
    rf"^\s*([A-Za-z_][\w ./()\-\[\]]*?)\s*[:=]?\s*({NUM}|[-+]?nan|[-+]?inf)\s*(%|ms|s)?\s*$", re.I
)

_STEP_WORD = re.compile(r"\b(global_step|iteration|iter|step)\s*[:=#]?\s*(\d+)\b", re.I)

_STEP_NAMES = (
    "iteration",
    "iter",
    "global_step",
    "trainer/global_step",
    "step",
    "num_updates",
    "updates",
    "update",
    "_step",
    "steps",
)


def to_float(text: Any) -> float | None:
    """A number from a JSON/CSV/text value: None when it is not one (nan and inf are numbers)."""
    if isinstance(text, bool):
        return float(text)
    if isinstance(text, (int, float)):
        return float(text)
    if not isinstance(text, str):
        return None
    t = text.strip().rstrip("%")
    if not t or len(t) > 64:
        return None
    try:
        return float(t)
    except ValueError:
        low = t.lower()
        if low in ("nan", "-nan", "+nan"):
            return math.nan
        if low in ("infinity", "+infinity"):
            return math.inf
        if low == "-infinity":
            return -math.inf
        return None


def clean_line(line: str) -> str:
    """Strip rank prefixes (`[default7]:`), markdown quote markers and surrounding space."""
    if not line:
        return ""
    s = line.strip()
    if s.startswith(">"):
        s = _QUOTE_PREFIX.sub("", s)
    if s.startswith("[") or s[:1].isdigit() or s.startswith("rank"):
        s = _RANK_PREFIX.sub("", s, count=1)
    return s


def pick_step(metrics: dict[str, float]) -> float | None:
    for key in _STEP_NAMES:
        v = metrics.get(key)
        if v is not None and math.isfinite(v):
            del metrics[key]
            return v
    lowered = {k.lower(): k for k in metrics}
    for key in _STEP_NAMES:
        k = lowered.get(key)
        if k is not None and math.isfinite(metrics[k]):
            return metrics.pop(k)
    return None


def flatten(
    obj: Any, prefix: str = "", out: dict[str, float] | None = None, depth: int = 0
) -> dict[str, float]:
    out = {} if out is None else out
    if depth > 8 or len(out) > 2000:
        return out
    if isinstance(obj, dict):
        for k, v in obj.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            flatten(v, key, out, depth + 1)
    elif isinstance(obj, list):
        if len(obj) <= 16:
            for i, v in enumerate(obj):
                flatten(v, f"{prefix}.{i}" if prefix else str(i), out, depth + 1)
    else:
        v = to_float(obj)
        if v is not None and prefix:
            out[prefix] = v
    return out


def parse_json_line(s: str) -> list[Record]:
    if not (s.startswith("{") and s.endswith("}")):
        return []
    try:
        obj = json.loads(s)
    except (ValueError, RecursionError):
        return parse_dict_line(s)
    if not isinstance(obj, dict):
        return []
    metrics = flatten(obj)
    if not metrics:
        return []
    step = pick_step(metrics)
    return [(step, metrics)] if metrics else []


def parse_dict_line(s: str) -> list[Record]:
    """A Python dict as printed by the HF Trainer: `{'loss': 2.1, 'grad_norm': nan, ...}`."""
    if "{" not in s or ":" not in s:
        return []
    metrics: dict[str, float] = {}
    for m in _DICT_ITEM.finditer(s):
        v = to_float(m.group(2))
        if v is not None:
            metrics[m.group(1)] = v
    if not metrics:
        return []
    step = pick_step(metrics)
    return [(step, metrics)] if metrics else []


def parse_megatron(s: str) -> list[Record]:
    """`iteration 100/ 1000 | lm loss: 2.1E+00 | grad norm: 0.3 | ...` and validation records."""
    m = _MEGATRON.search(s)
    prefix = ""
    if m is None:
        m = _MEGATRON_VAL.search(s)
        if m is None:
            return []
        step = float(m.group(2))
        prefix = "validation "
        rest = s[m.end() :]
    else:
        step = float(m.group(1))
        rest = s[m.end() :]
    metrics: dict[str, float] = {}
    for part in rest.split("|"):
        if ":" not in part:
            continue
        key, _, val = part.rpartition(":")
        key = " ".join(key.split())
        if not key or len(key) > 80:
            continue
        v = to_float(val.split()[0]) if val.split() else None
        if v is not None:
            metrics[prefix + key] = v
    return [(step, metrics)] if metrics else []


def parse_nanogpt(s: str) -> list[Record]:
    """`iter 100: loss 4.2, time 12.3ms, mfu 30.1%` and `step 100: train loss 4.2, val loss 4.3`."""
    m = _NANOGPT_ITER.match(s) or _NANOGPT_STEP.match(s)
    if m is None:
        return []
    metrics: dict[str, float] = {}
    for part in m.group(2).split(","):
        pm = _PART_KV.match(part)
        if pm:
            v = to_float(pm.group(2))
            if v is not None:
                metrics[" ".join(pm.group(1).split())] = v
    return [(float(m.group(1)), metrics)] if metrics else []


def parse_tqdm(line: str) -> list[Record]:
    """tqdm bars (possibly several `\\r`-separated updates in one line) with postfix values."""
    if "|" not in line and "it/s" not in line and "s/it" not in line:
        return []
    out: list[Record] = []
    for seg in line.split("\r"):
        m = _TQDM.search(seg)
        if m is None:
            continue
        metrics: dict[str, float] = {}
        if m.group(3):
            v = to_float(m.group(3))
            if v is not None:
                metrics[m.group(4)] = v
        if m.group(5):
            for km in _KV.finditer(m.group(5)):
                v = to_float(km.group(2))
                if v is not None:
                    metrics[km.group(1)] = v
        if metrics:
            step = float(m.group(1))
            # `Epoch 3: 40%|... 200/500`: the bar restarts every epoch; count steps across epochs
            em = _TQDM_EPOCH.search(seg, 0, m.start())
            if em is not None:
                step += float(em.group(1)) * float(m.group(2))
            out.append((step, metrics))
    return out


def parse_keyvalue(s: str) -> list[Record]:
    """Generic `key=value`, `key: value` and `key value` records, pipe- or comma-separated
    (fairseq, `step 100 | loss 2.1 | lr 1e-4`, logging lines with `loss=2.1, lr=1e-4`)."""
    if not any(c.isdigit() for c in s):
        return []
    metrics: dict[str, float] = {}
    if "|" in s:
        for part in s.split("|"):
            pm = _PART_KV.match(part)
            if pm:
                v = to_float(pm.group(2))
                if v is not None:
                    metrics[" ".join(pm.group(1).split())] = v
            else:
                _kv_into(part, metrics)
    else:
        _kv_into(s, metrics)
    if not metrics:
        return []
    step = pick_step(metrics)
    if step is None:
        m = _STEP_WORD.search(s)
        if m:
            step = float(m.group(2))
    return [(step, metrics)] if metrics else []


def _kv_into(text: str, metrics: dict[str, float]) -> None:
    if "=" in text or ":" in text:
        for km in _KV.finditer(text):
            v = to_float(km.group(2))
            if v is not None:
                metrics[km.group(1)] = v


def parse_line_auto(raw: str) -> list[Record]:
    """Try the parsers that fit the line's shape, most specific first."""
    s = clean_line(raw)
    if not s:
        return []
    if "\r" in s or "it/s" in s or "s/it" in s:
        recs = parse_tqdm(s)
        if recs:
            return recs
        s = s.split("\r")[-1].strip()
    c = s[0]
    if c == "{":
        return (
            parse_json_line(s)
            if '"' in s[:3] or s.startswith("{}")
            else parse_dict_line(s) or parse_json_line(s)
        )
    if "iteration" in s and "|" in s:
        recs = parse_megatron(s)
        if recs:
            return recs
    if (c == "i" or c == "s") and ":" in s[:16]:
        recs = parse_nanogpt(s)
        if recs:
            return recs
    if "{" in s and "'" in s:
        recs = parse_dict_line(s[s.index("{") :])
        if recs:
            return recs
    return parse_keyvalue(s)


LINE_PARSERS = {
    "jsonl": lambda line: parse_json_line(clean_line(line)),
    "hf_dict": lambda line: parse_dict_line(clean_line(line)),
    "megatron": lambda line: parse_megatron(clean_line(line)),
    "nanogpt": lambda line: parse_nanogpt(clean_line(line)),
    "tqdm": parse_tqdm,
    "keyvalue": lambda line: parse_keyvalue(clean_line(line)),
    "auto": parse_line_auto,
}

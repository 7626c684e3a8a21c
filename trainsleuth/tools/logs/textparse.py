"""Line parsers for text logs. Every function takes one decoded line and returns records; none
of them raises on any input (property-tested).

A record is `(step or None, {metric name: float}, step source)`: the step source says where the
step came from (`iteration`, `s`, `step N/TOTAL`, `tqdm position`, ...; empty when the line has
none). A parser given a `units` dict fills it with the unit each metric carried (`ms`, `%`).
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from typing import Any, TypeAlias

from trainsleuth.tools.logs.numbers import NUM, NUMV, UNIT, number, to_float
from trainsleuth.tools.logs.roles import role_of

Record: TypeAlias = "tuple[float | None, dict[str, float], str]"
Units: TypeAlias = "dict[str, str] | None"

_RANK_PREFIX = re.compile(
    r"^\s*(?:\[(?:default|rank|Rank|RANK)\s*\d+\]\s*:?|\[\s*\d+\]\s*:|\d+\s*:|rank\s*\d+\s*:)\s*"
)
_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[A-Za-z]|[()][A-Z0-9])")  # starts with a literal: fast to scan for
# `[12]\ttraining's multi_logloss: 0.4` (LightGBM, XGBoost): a boosting round at the start of the line
has_digit = re.compile(r"\d").search  # far faster than looping over characters
_COUNTER = re.compile(r"^\s*\d+/\d+\b")  # a batch counter opening a progress frame (`22/44 ━━━ ...`)
_ROUND = re.compile(r"^\[(\d+)\]\s+(?=\S)")
# SB3's tables: `|    loss                 | 9.42        |` and section rows `| train/  |   |`
_TABLE_ROW = re.compile(r"^\|\s*([A-Za-z_][\w./ \-]*?)\s*\|\s*(\S*)\s*\|$")
_WARNING = re.compile(
    r"\[(?:Warning|WARNING|WARN)\]|^\s*(?:WARNING|Warning|UserWarning|FutureWarning|DeprecationWarning)\b"
)
_QUOTE_PREFIX = re.compile(r"^\s*(?:>\s*)+")

_MEGATRON = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_MEGATRON_VAL = re.compile(
    r"\b(validation|evaluation|test)\s+loss\s+at\s+(?:iteration|step)\s+(\d+)\s*\|", re.I
)
# `| lm loss: 2.1E+00 ` (one pair between pipes; the key may hold spaces and parentheses)
_MEGATRON_PAIR = re.compile(r"\|?\s*([^|:]+?)\s*:\s*([^\s|]+)[^|]*")
_NANOGPT_ITER = re.compile(r"^\s*iter\s+(\d+)\s*:\s*(.*)$")
_NANOGPT_STEP = re.compile(r"^\s*step\s+(\d+)\s*:\s*(.*)$")
_KEY = r"[A-Za-z_][\w./\-\[\]]*"
_KV = re.compile(
    rf"(?<![\w./\-\[\]])({_KEY})\s*[=:]\s*({NUMV})((?-i:[kKM]))?(?:\s?({UNIT}))?(?=[\s,;|)\]}}]|$)",
    re.I,
)
# `key value` pairs without `=` or `:`: the key is one word, or two when the first qualifies the
# second (`train loss`, `grad norm`); such a line counts only if some key is a known metric
_SPACE_KV = re.compile(
    rf"(?<![\w./-])([A-Za-z][A-Za-z0-9_]*(?:\s+[A-Za-z][A-Za-z0-9_]*)?)\s+({NUMV})((?-i:[kKM]))?(?:\s?({UNIT}))?(?=[\s,;|)\]]|$)",
    re.I,
)
# `'key': value` in a printed dict; the value is checked by `_dict_value` (a plain character class
# here keeps the regex fast on the long dict lines of the HF Trainer)
_DICT_ITEM = re.compile(r"""['"]([^'"]+)['"]\s*:\s*((?:\w+(?:\.\w+)*\([^)]*\))|[^,}]+)""")
_DICT_WRAP = re.compile(r"^(?:np\.float\d*|tensor|float)\((.*?)(?:,[^)]*)?\)$")
_BAR_POS = re.compile(r"(\d+)/(\d+)\s*\[")
_TQDM = re.compile(r"(\d+)/(\d+)\s*\[[^\]]*?(?:,\s*([\d.]+)\s*(it/s|s/it))?\s*(?:,\s*(.*?))?\]")
_TQDM_EPOCH = re.compile(r"\b[Ee]poch\s*(\d+)\b")
_PART_KV = re.compile(
    rf"^\s*([A-Za-z_][\w ./()\-\[\]']*?)\s*[:=]?\s*({NUMV})((?-i:[kKM]))?\s*({UNIT})?\s*$",
    re.I,
)
_PART_UNIT_ONLY = re.compile(rf"^\s*\(?\s*({NUM})\s*({UNIT})\s*\)?\s*$")
# `step 120/19560`, `iter: 5 / 1000`, `Epoch 3/20`, `Batch 100/500`: a position and its total
_FRACTION = re.compile(
    r"\b(global[ _]step|step|iteration|iter|it|update|batch|epoch)s?\s*[:=#]?\s*(\d+)\s*/\s*(\d+)\b", re.I
)
# a whole line that is one `key = value` pair whose key may hold spaces and parentheses
_LONE_PAIR = re.compile(rf"^([A-Za-z_][\w ./()\-]*?)\s*=\s*({NUMV})((?-i:[kKM]))?\s*({UNIT})?\s*$", re.I)
# torchvision's references: `Epoch: [3]  [12/100]` (the batch within the epoch)
_EPOCH_BATCH = re.compile(r"\bEpoch:?\s*\[(\d+)\]\s*\[\s*(\d+)\s*/\s*(\d+)\]")
_EVAL_PROGRESS = re.compile(r"\beval\w*\s*[=:]\s*\w+\s*,\s*step\s*[=:]\s*\d+\s*/", re.I)
_EPOCH_WORD = re.compile(r"\bepoch\s*[:=#]?\s*(\d+)\b", re.I)
_STEP_WORD = re.compile(r"\b(global_step|iteration|iter|step)\s*[:=#]?\s*(\d+)\b", re.I)
# a line that is only a heading around `Epoch N/M` (`Epoch 3/20`, `***** Evaluating perplexity, Epoch 0/16 *****`)
_EPOCH_ONLY = re.compile(r"^[^\d]*\bepoch\s*[:#]?\s*(\d+)\s*/\s*(\d+)[\s:*=\-]*$", re.I)

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
    "time/total_timesteps",
    "total_timesteps",
)
_STEP_RANK = {name: i for i, name in enumerate(_STEP_NAMES)}
# taken as the step only when the value is a whole number (llm.c writes `s:120 trl:3.41`)
_INTEGRAL_STEP_NAMES = ("s", "it")
# a part of a pipe-separated line naming the subset its values are about (fairseq's loggers)
_SECTIONS = {
    "valid": "valid ",
    "validation": "validation ",
    "eval": "eval ",
    "test": "test ",
    "train": "train ",
}
_QUALIFIERS = {
    "train", "training", "val", "valid", "validation", "eval", "evaluation", "test", "dev", "lm", "grad",
    "gradient", "learning", "loss", "global", "total", "avg", "average", "mean", "running", "tokens",
    "samples", "elapsed", "batch", "step", "top", "param", "weight", "update",
}  # fmt: skip


def clean_line(line: str) -> str:
    """Strip terminal escapes and backspaces, rank prefixes (`[default7]:`), markdown quote markers
    and surrounding space."""
    if not line:
        return ""
    s = line.strip()
    if "\x1b" in s:
        s = _ANSI.sub("", s).strip()
    if "\x08" in s or "\x07" in s:  # backspaces and bells (Keras progress bars)
        s = s.replace("\x08", "").replace("\x07", "").strip()
    if s.startswith(">"):
        s = _QUOTE_PREFIX.sub("", s)
    if s.startswith("[") or s[:1].isdigit() or s.startswith("rank"):
        s = _RANK_PREFIX.sub("", s, count=1)
    return s


def pick_step(metrics: dict[str, float]) -> tuple[float | None, str]:
    """Take the step out of `metrics`: (step, the key it came from), or (None, ""). Exact names
    first, in `_STEP_NAMES` order, then the same names in another case, then `_INTEGRAL_STEP_NAMES`."""
    best: tuple[int, str] | None = None
    for k in metrics:  # one pass over the (few) keys instead of a lookup per step name
        rank = _STEP_RANK.get(k)
        if rank is None:
            low = _STEP_RANK.get(k.lower())
            rank = None if low is None else low + len(_STEP_NAMES)
        if rank is not None and (best is None or rank < best[0]) and math.isfinite(metrics[k]):
            best = (rank, k)
    if best is not None:
        return metrics.pop(best[1]), best[1]
    for key in _INTEGRAL_STEP_NAMES:
        v = metrics.get(key)
        if v is not None and math.isfinite(v) and v == int(v) and v >= 0:
            del metrics[key]
            return v, key
    return None, ""


def _epoch_step(metrics: dict[str, float]) -> tuple[float | None, str]:
    """A whole-number epoch is the step of a log that counts nothing finer (`Epoch 3 | loss ...`)."""
    for k in ("epoch", "Epoch", "EPOCH"):
        v = metrics.get(k)
        if v is not None and math.isfinite(v) and v == int(v) and v >= 0:
            return v, k
    return None, ""


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


def parse_json_line(s: str, units: Units = None) -> list[Record]:
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
    step, key = pick_step(metrics)
    return [(step, metrics, key)] if metrics else []


def parse_dict_line(s: str, units: Units = None) -> list[Record]:
    """A Python dict as printed by the HF Trainer: `{'loss': 2.1, 'grad_norm': nan, ...}`."""
    if "{" not in s or ":" not in s:
        return []
    metrics: dict[str, float] = {}
    body = s.strip()
    if body[:2] in ("{'", '{"') and body.endswith("}") and "(" not in body and "{" not in body[1:]:
        # the usual flat dict (HF Trainer): split it instead of searching it (several times faster)
        q = body[1]
        for item in body[2:-1].split(", " + q):
            key, sep, value = item.partition(q + ": ")
            if sep:
                v = _dict_value(value)
                if v is not None:
                    metrics[key] = v
    else:
        for m in _DICT_ITEM.finditer(s):
            v = _dict_value(m.group(2))
            if v is not None:
                metrics[m.group(1)] = v
    if not metrics:
        return []
    step, key = pick_step(metrics)
    return [(step, metrics, key)] if metrics else []


def _dict_value(text: str) -> float | None:
    """`2.1`, `'3.949'` (transformers 5 prints strings), `nan`, `np.float64(2.1)`, `tensor(2.1)`."""
    try:
        return float(text)
    except ValueError:
        pass
    t = text.strip().strip("'\"")
    v = to_float(t)
    if v is None and "(" in t:
        m = _DICT_WRAP.match(t)
        if m:
            v = to_float(m.group(1).strip().strip("'\""))
    return v


def parse_megatron(s: str, units: Units = None) -> list[Record]:
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
    for key, val in _MEGATRON_PAIR.findall(rest):
        v = to_float(val)
        if v is None:
            continue
        key = " ".join(key.split())
        if key and len(key) <= 80:
            metrics[prefix + key] = v
    return [(step, metrics, "iteration")] if metrics else []


def parse_nanogpt(s: str, units: Units = None) -> list[Record]:
    """`iter 100: loss 4.2, time 12.3ms, mfu 30.1%` and `step 100: train loss 4.2, val loss 4.3`."""
    m = _NANOGPT_ITER.match(s) or _NANOGPT_STEP.match(s)
    if m is None:
        return []
    metrics: dict[str, float] = {}
    for part in m.group(2).split(","):
        _part_into(part, metrics, units)
    return [(float(m.group(1)), metrics, s.split(None, 1)[0].lower())] if metrics else []


def parse_tqdm(line: str, units: Units = None) -> list[Record]:
    """tqdm bars (possibly several `\\r`-separated updates in one line) with postfix values. The
    bar's position is the step; a bar without postfix values is progress, not a metric record."""
    if "|" not in line and "it/s" not in line and "s/it" not in line:
        return []
    out: list[Record] = []
    for seg in line.split("\r"):
        if seg.endswith(("it/s]", "s/it]")):  # a bare redraw: a cheaper search finds its position
            bm = _BAR_POS.search(seg)
            if bm is not None:
                out.append((float(bm.group(1)), {}, f"tqdm position/{bm.group(2)}"))
            continue
        m = _TQDM.search(seg)
        if m is None:
            continue
        if not m.group(5):  # a bare bar: its position only (see `bar_total`)
            out.append((float(m.group(1)), {}, f"tqdm position/{m.group(2)}"))
            continue
        metrics: dict[str, float] = {}
        for km in _KV.finditer(m.group(5)):
            v = number(km.group(2), km.group(3))
            if v is not None:
                metrics[km.group(1)] = v
                if units is not None and km.group(4):
                    units[km.group(1)] = km.group(4)
        if not metrics:
            continue
        if m.group(3):
            v = to_float(m.group(3))
            if v is not None:
                metrics[m.group(4)] = v
        step = float(m.group(1))
        source = "tqdm position"
        # `Epoch 3: 40%|... 200/500`: the bar restarts every epoch; count steps across epochs
        em = _TQDM_EPOCH.search(seg, 0, m.start())
        if em is not None:
            step += float(em.group(1)) * float(m.group(2))
            source = "epoch x bar total + tqdm position"
        out.append((step, metrics, source))
    return out


def _part_into(part: str, metrics: dict[str, float], units: Units) -> bool:
    """One `|`- or `,`-separated part: `key: value [unit]`, or `value unit` alone (named by its unit)."""
    pm = _PART_KV.match(part)
    if pm:
        v = number(pm.group(2), pm.group(3))
        if v is not None:
            key = " ".join(pm.group(1).split())
            metrics[key] = v
            if units is not None and pm.group(4):
                units[key] = pm.group(4)
            return True
    um = _PART_UNIT_ONLY.match(part)
    if um:
        v = to_float(um.group(1))
        unit = um.group(2)
        if v is not None and ("/" in unit or unit in ("ms", "s", "sec", "%")):
            key = {"ms": "time (ms)", "s": "time (s)", "sec": "time (s)", "%": "percent"}.get(unit, unit)
            metrics[key] = v
            return True
    return False


def _fraction(s: str) -> tuple[str, float | None, str, dict[str, float]]:
    """Take `step 120/19560`-style positions out of a line: (the rest of the line, the step,
    its source, extra metrics such as the epoch)."""
    if "/" not in s:
        return s, None, "", {}
    eb = _EPOCH_BATCH.search(s)
    if eb is not None:
        e, b, t = float(eb.group(1)), float(eb.group(2)), float(eb.group(3))
        return s[: eb.start()] + " " + s[eb.end() :], e * t + b, "epoch x batches + batch", {"epoch": e}
    if _EVAL_PROGRESS.search(s):  # `[eval=lm,step=5/6]`: evaluation batches, not training steps
        return s, None, "", {}
    step: float | None = None
    source = ""
    extra: dict[str, float] = {}
    epoch: float | None = None
    batch: tuple[float, float] | None = None
    for m in _FRACTION.finditer(s):
        word = m.group(1).lower().replace(" ", "_")
        n = float(m.group(2))
        if word == "epoch":
            epoch = n
            extra["epoch"] = n
        elif word == "batch":
            batch = (n, float(m.group(3)))
        elif step is None:
            step, source = n, f"{m.group(1)} N/TOTAL"
    if step is None and batch is not None and epoch is None:
        em = _EPOCH_WORD.search(s)
        epoch = float(em.group(1)) if em else None
    if step is None and batch is not None and epoch is not None:
        step, source = epoch * batch[1] + batch[0], "epoch x batches + batch"
    rest = _FRACTION.sub(lambda m: " " + m.group(1) + " ", s) if (step is not None or extra or batch) else s
    return rest, step, source, extra


def parse_keyvalue(s: str, units: Units = None) -> list[Record]:
    """Generic `key=value`, `key: value` and `key value` records, pipe- or comma-separated
    (fairseq, llm.c `step 120/19560 | train loss 3.41 | norm 1.2`, logging lines with
    `loss=2.1, lr=1e-4`, `epoch 1 iter 500 loss 0.5 acc 87.5%`)."""
    if not has_digit(s):
        return []
    em = _EPOCH_ONLY.match(s)
    if em:  # `Epoch 3/20` alone: the epoch the following lines belong to (Keras)
        return [(float(em.group(1)), {}, "epoch N/TOTAL")]
    lone = _LONE_PAIR.match(s)
    if lone and " " in lone.group(1).strip():  # OLMo-core: `    train/CE loss=5.546`, one pair a line
        v = number(lone.group(2), lone.group(3))
        if v is not None:
            key = " ".join(lone.group(1).split())
            if units is not None and lone.group(4):
                units[key] = lone.group(4)
            return [(None, {key: v}, "")]
    s, step, source, metrics = _fraction(s)
    sep = "|" if "|" in s else "\t" if "\t" in s else None
    if sep:
        section = ""  # fairseq: `| valid | epoch 001 | loss 9.73 |`, `| train | epoch 001 | loss 10.19 |`
        for part in s.split(sep):
            word = part.strip()
            if word in _SECTIONS:
                section = _SECTIONS[word]
                continue
            found: dict[str, float] = {}
            if not _part_into(part, found, units):
                _kv_into(part, found, units)
            for key, value in found.items():
                metrics[
                    section + key if section and key != "epoch" and pick_step({key: 0.0})[1] == "" else key
                ] = value
    else:
        _kv_into(s, metrics, units)
    if not metrics:
        return []
    if step is None:
        step, source = pick_step(metrics)
    if step is None:
        m = _STEP_WORD.search(s)
        if m:
            step, source = float(m.group(2)), m.group(1).lower()
    if step is None:
        step, source = _epoch_step(metrics)
    return [(step, metrics, source)] if metrics else []


def _kv_into(text: str, metrics: dict[str, float], units: Units) -> None:
    found = False
    if "=" in text or ":" in text:
        for km in _KV.finditer(text):
            v = number(km.group(2), km.group(3))
            if v is not None:
                metrics[km.group(1)] = v
                found = True
                if units is not None and km.group(4):
                    units[km.group(1)] = km.group(4)
    if not found:
        _space_kv_into(text, metrics, units)


def _space_kv_into(text: str, metrics: dict[str, float], units: Units) -> None:
    pairs: list[tuple[str, float, str | None]] = []
    known = False
    for km in _SPACE_KV.finditer(text):
        v = number(km.group(2), km.group(3))
        if v is None:
            continue
        words = km.group(1).split()
        key = " ".join(words) if len(words) == 2 and words[0].lower() in _QUALIFIERS else words[-1]
        role = role_of(key)
        if role not in ("other", "step", "epoch", "progress"):
            known = True
        pairs.append((key, v, km.group(4)))
    if known:
        for key, v, unit in pairs:
            metrics[key] = v
            if units is not None and unit:
                units[key] = unit


@lru_cache(maxsize=256)
def bar_total(source: str) -> int | None:
    """The total of a bare progress bar's step-only record (`tqdm position/1000` -> 1000)."""
    if source.startswith("tqdm position/"):
        tail = source.rsplit("/", 1)[1]
        return int(tail) if tail.isdigit() else None
    return None


def parse_line_auto(raw: str, units: Units = None) -> list[Record]:
    """Try the parsers that fit the line's shape, most specific first. A line of several
    carriage-return frames (tqdm redraws, a dict printed between them) is read frame by frame."""
    s = clean_line(raw)
    if not s:
        return []
    if "\r" in s:
        out: list[Record] = []
        counted: list[Record] = []  # the latest frame of a progress display without steps (Keras)
        for seg in _frames_that_matter(s.split("\r")):
            recs = _parse_frame(seg, units)
            if recs and _COUNTER.match(seg) and all(step is None for step, _, _ in recs):
                counted = recs
            else:
                out += recs
        return out + counted
    return _parse_frame(s, units)


def _frames_that_matter(frames: list[str]) -> list[str]:
    """Of a line's carriage-return frames, the ones that can change what is read: everything that
    is not a bare tqdm redraw, the redraw right before each of those (the step it was printed at),
    and the line's first and last redraws (the step context across lines). A training log with
    tqdm holds thousands of redraws per logged record; the others are never parsed."""
    keep: list[int] = []
    last_bar = -1
    stripped = [f.strip() for f in frames]
    for i, f in enumerate(stripped):
        if not f:
            continue
        if "%|" in f and f.endswith(("it/s]", "s/it]")):  # a bare tqdm redraw (no postfix values)
            if not keep:
                keep.append(i)
            last_bar = i
            continue
        if last_bar >= 0 and keep[-1] != last_bar:
            keep.append(last_bar)
        keep.append(i)
        last_bar = -1
    if last_bar >= 0 and keep[-1] != last_bar:
        keep.append(last_bar)
    return [stripped[i] for i in keep]


def _parse_frame(s: str, units: Units) -> list[Record]:
    if "it/s" in s or "s/it" in s or ("|" in s and "[" in s):
        recs = parse_tqdm(s, units)
        if recs or _TQDM.search(s):
            return recs
    if ("arn" in s or "ARN" in s) and _WARNING.search(s):
        return []  # warnings quote numbers (`best gain: -inf`), metrics are logged at info level
    c = s[0]
    if c == "|" and s.endswith("|"):
        m = _TABLE_ROW.match(s)
        if m:
            v = to_float(m.group(2))
            return [(None, {m.group(1): v}, "table row")] if v is not None else []
        return []
    rm = _ROUND.match(s) if c == "[" else None
    if rm:  # `[12]\ttraining's multi_logloss: 0.4\tvalid_1's multi_logloss: 0.5`
        recs = parse_keyvalue(s[rm.end() :], units)
        return [(float(rm.group(1)), m, "[N] round") for _, m, _ in recs] if recs else []
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
        recs = parse_nanogpt(s, units)
        if recs:
            return recs
    if "{" in s and "'" in s:
        recs = parse_dict_line(s[s.index("{") :])
        if recs:
            return recs
    return parse_keyvalue(s, units)


def with_step_key(parser: Any, key: str) -> Any:
    """`parser` with `key` as the step (the user's correction, `--role step=KEY`): a record that
    holds `key` is filed under its value; one without it has no step of its own."""

    def parse(line: str, units: Units = None) -> list[Record]:
        out: list[Record] = []
        for step, metrics, source in parser(line, units):
            if key in metrics:
                step, source = metrics.pop(key), key
            elif source != key:
                step, source = None, ""
            if metrics or step is not None:
                out.append((step, metrics, source))
        return out

    return parse


LINE_PARSERS = {
    "jsonl": lambda line, units=None: parse_json_line(clean_line(line)),
    "hf_dict": lambda line, units=None: parse_dict_line(clean_line(line)),
    "megatron": lambda line, units=None: parse_megatron(clean_line(line)),
    "nanogpt": lambda line, units=None: parse_nanogpt(clean_line(line), units),
    "tqdm": parse_tqdm,
    "keyvalue": lambda line, units=None: parse_keyvalue(clean_line(line), units),
    "auto": parse_line_auto,
}

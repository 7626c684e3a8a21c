"""Numbers as training logs print them: `2.1E+00`, `nan`, `47,831` (thousands separators),
`47.8k`, and values followed by a unit (`12.3 min`, `45 ms`, `87 %`, `3.2 GB`, `7.1it/s`).

A unit never becomes part of a metric's name or stops its value from being read; the parsers
report which unit each metric carried (parse report)."""

from __future__ import annotations

import math
import re
from typing import Any

# A number: thousands groups only as `d,ddd` (1-3 digits, then groups of exactly 3).
NUM = r"[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
NONFINITE = r"[-+]?(?:nan|inf(?:inity)?)"
NUMV = rf"(?:{NUM}|{NONFINITE})"

# Units a value may carry, glued to it or after one space. Longest first (the alternation is
# tried in order); each must end at a word boundary, so `s` in `step` is never a unit.
UNITS = (
    "tokens/sec", "tokens/s", "samples/sec", "samples/s", "images/sec", "images/s", "img/s", "imgs/s",
    "seq/s", "tok/sec", "tok/s", "it/s", "s/it", "ms/step", "ms/it", "ms/batch", "s/step",
    "TFLOPs", "TFLOP/s", "tflops", "GFLOPs", "%",
    "seconds", "second", "secs", "sec", "minutes", "minute", "mins", "min", "hours", "hour", "hrs", "hr",
    "ms", "us", "µs", "ns", "s", "h",
    "GiB", "MiB", "KiB", "TiB", "GB", "MB", "KB", "kB", "TB", "bytes", "nats", "bits", "bpc", "x",
)  # fmt: skip
UNIT = "(?:" + "|".join(re.escape(u) for u in UNITS) + r")(?![\w/%])"
_MULTIPLIER = {"k": 1e3, "K": 1e3, "M": 1e6}


def to_float(text: Any) -> float | None:
    """A number from a JSON/CSV/text value: None when it is not one (nan and inf are numbers).
    A trailing `%` and thousands separators (`47,831`) are allowed."""
    if type(text) is str:  # the common case first: a plain number
        try:
            return float(text)
        except ValueError:
            pass
    elif isinstance(text, (int, float)):  # bool included
        return float(text)
    else:
        return None
    t = text.strip().rstrip("%").rstrip()
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
        if "," in t and _GROUPED.match(t):
            return float(t.replace(",", ""))
        return None


_GROUPED = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d*)?(?:[eE][-+]?\d+)?$")


def number(text: str, suffix: str | None = None) -> float | None:
    """The value of a NUMV match; `suffix` is a multiplier letter glued to it (k, K, M)."""
    v = to_float(text)
    if v is not None and suffix:
        v *= _MULTIPLIER.get(suffix, 1.0)
    return v


def decimals(values: Any, start: int = 0) -> int | None:
    """The fewest decimals (at least `start`) that write every finite value of a numpy array
    exactly; None when more than 8 are needed (the values are not rounded to fixed places).
    Long arrays are sampled (at most 4096 values, evenly spread): values printed to fixed places
    are all rounded alike, and values that are not show it in any sample."""
    import numpy as np

    v = np.asarray(values, dtype=np.float64)
    if len(v) > 4096:
        v = v[:: len(v) // 4096]
    v = v[np.isfinite(v)]
    if not len(v):
        return start
    if float(np.abs(v).max()) > 1e15:
        return None
    for d in range(start, 9):
        scaled = v * 10.0**d
        if np.all(np.abs(scaled - np.rint(scaled)) <= 1e-9 * np.maximum(1.0, np.abs(scaled))):
            return d
    return None

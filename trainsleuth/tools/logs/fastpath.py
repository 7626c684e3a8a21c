"""Block-level fast path for text logs: learn line templates, then parse whole blocks in C.

Training logs repeat a few line shapes millions of times; only the numbers change. The first
lines of each shape go through the ordinary line parsers. Once a shape (the line with its
numbers replaced by a placeholder) has been seen twice, it becomes a *template*: the parser is
run again on the sample with one number at a time replaced by a sentinel, which tells which
number is the step and which metric each other number is (numbers that feed no metric are just
matched). From then on `re.split` with the template's regex takes every matching line of a
4 MiB block at once and hands back the numbers column by column, converted with numpy. Lines
that match no template (new shapes, chatter, wrapped records) fall through to the line parsers.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainsleuth.tools.logs.errors import is_error_line

# A number as the parsers see one: not glued to a word (`layer_0`, `[default7]` stay literal).
NUM_PATTERN = (
    r"(?<![\w.,])[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
    r"|(?<![\w.])[-+]?(?:nan|NaN|NAN|inf|Inf|INF|Infinity)(?!\w)"
)
NUM_TOKEN = re.compile(NUM_PATTERN)
MAX_TEMPLATES = 64
MAX_ACTIVE = 32
MAX_TEMPLATE_LINE = 4096

LineParser = Callable[..., list[tuple["float | None", dict[str, float], str]]]


@dataclass
class Template:
    regex: re.Pattern[str] | None  # None: this shape is parsed line by line
    strict: re.Pattern[str] | None = None
    groups: int = 0
    step_slot: int | None = None
    slots: list[tuple[int, str]] = field(default_factory=list)  # (group, metric name)
    seen: int = 1
    hits: int = 0
    idle_blocks: int = 0
    source: str = ""  # where the step comes from (the parser's step source for this shape)
    grouped: frozenset[int] = frozenset()  # groups printed with thousands separators (`47,831`)


def _sentinel(token: str) -> tuple[str, float]:
    if token.lstrip("+-").isdigit():
        return "987654321", 987654321.0
    return "98765.4321", 98765.4321


def build_template(line: str, parser: LineParser) -> Template:
    """Map each number of `line` to the step or a metric, or refuse (regex None)."""
    refuse = Template(regex=None)
    if len(line) > MAX_TEMPLATE_LINE or "\r" in line.rstrip("\r") or is_error_line(line):
        return refuse  # error-looking lines always go through the line path (and the error scanner)
    try:
        base = parser(line)
    except Exception:  # the parsers never raise; be safe anyway
        return refuse
    if len(base) > 1:
        return refuse
    spans = [m.span() for m in NUM_TOKEN.finditer(line)]
    if not base:
        if not spans:
            return refuse  # a line without numbers is cheap to parse anyway
        return _compile(line, spans, set(), Template(regex=None))
    step0, metrics0, source0 = base[0]
    names0 = set(metrics0)
    t = Template(regex=None, source=source0)
    literal: set[int] = set()
    mapped: set[str] = set()
    for k, (a, b) in enumerate(spans):
        text, value = _sentinel(line[a:b])
        recs = parser(line[:a] + text + line[b:])
        if len(recs) != 1:
            return refuse
        step_k, metrics_k, _ = recs[0]
        if set(metrics_k) != names0:
            if line[a:b].lstrip("+-").isalpha():
                literal.add(k)  # a word like `nan` inside a key ("number of nan iterations")
                continue
            return refuse
        if step_k == value and step0 != value:
            t.step_slot = k
            continue
        hit = [name for name, v in metrics_k.items() if v == value and metrics0.get(name) != value]
        if len(hit) == 1:
            t.slots.append((k, hit[0]))
            mapped.add(hit[0])
    if mapped != names0 or (step0 is not None and t.step_slot is None) or step0 is None:
        return refuse
    return _compile(line, spans, literal, t)


def _compile(line: str, spans: list[tuple[int, int]], literal: set[int], t: Template) -> Template:
    """Two regexes per shape: a fast one whose number groups are "anything up to the next
    literal character" (no backtracking; float() validates every token), and a strict one
    used for a block where the fast one caught something that is not a number."""
    kept = [(a, b) for k, (a, b) in enumerate(spans) if k not in literal]
    group_of: dict[int, int] = {}
    g = 0
    for k in range(len(spans)):
        if k not in literal:
            group_of[k] = g
            g += 1
    lits: list[str] = []
    pos = 0
    for a, b in kept:
        lits.append(line[pos:a])
        pos = b
    tail = line[pos:]
    fast: list[str] = []
    strict: list[str] = []
    for i, lit in enumerate(lits):
        fast.append(_literal(lit))
        strict.append(_literal(lit))
        after = lits[i + 1] if i + 1 < len(lits) else tail
        stop = after[:1] or "\n"
        fast.append("([^" + re.escape(stop) + ("\\n" if stop != "\n" else "") + "]+)")
        strict.append("(" + _GROUP + ")")
    fast.append(_literal(tail))
    strict.append(_literal(tail))
    try:
        # a line is "\n" + its text, followed by "\n": the leading newline is a literal the regex
        # engine can scan for (far faster than `^` in multi-line mode); `consume` puts one before
        # the block's first line
        t.regex = re.compile("\n" + "".join(fast) + "(?=\n)")
        t.strict = re.compile("\n" + "".join(strict) + "(?=\n)")
    except re.error:
        t.regex = None
        return t
    t.groups = g
    t.grouped = frozenset(group_of[k] for k, (a, b) in enumerate(spans) if k in group_of and "," in line[a:b])
    t.step_slot = group_of[t.step_slot] if t.step_slot is not None else None
    t.slots = [(group_of[k], name) for k, name in t.slots]
    return t


_SPACES = re.compile(" +")
# a progress bar's fill (`|█████▍    |`, `|####5     |`) changes every redraw: any fill is one shape
_BAR_FILL = re.compile(r"(?<=%\|)[^|\n]*(?=\|)")


def _literal(text: str) -> str:
    """Literal text of a template; a run of spaces matches any run (aligned columns), and a
    progress bar's fill matches any fill."""
    pieces = _BAR_FILL.split(text)
    return "[^|\n]*".join(" +".join(re.escape(p) for p in _SPACES.split(piece)) for piece in pieces)


def shape_key(line: str) -> str:
    return _BAR_FILL.sub("", _SPACES.sub(" ", NUM_TOKEN.sub("\x00", line)))


# Inside a template the literal text around a number is fixed, so the number itself needs no
# look-behind: a simpler pattern keeps the regex engine fast.
_GROUP = (
    r"[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
    r"|[-+]?(?:nan|NaN|NAN|inf|Inf|INF|Infinity)"
)


def keep_next_to_others(regex: re.Pattern[str], rest: str) -> tuple[str, int]:
    """Take the lines `regex` matches (progress-bar redraws; each match is "\n" + a line) out of
    `rest` (which begins with "\n"), except the ones next to other lines: the redraw before a line
    and the one after it carry the step that line was printed at (the HF Trainer prints its dicts
    between redraws). Returns the rest and how many lines matched."""
    out: list[str] = []
    pos = 0
    rows = 0
    pending: str | None = None  # the latest redraw not kept yet
    for m in regex.finditer(rest):
        rows += 1
        gap = rest[pos : m.start()]
        if gap:
            if pending is not None:
                out.append(pending)
            out.append(gap)
            out.append(m.group(0))
            pending = None
        else:
            pending = m.group(0)
        pos = m.end()
    if pending is not None:
        out.append(pending)  # the last redraw: the step context for what follows
    out.append(rest[pos:])
    return "".join(out), rows


def _grouped_float(cell: str) -> float:
    return float(cell.replace(",", ""))


class BlockSink:
    """Columns gathered from one block, per metric, before they go into the series."""

    def __init__(self) -> None:
        self.cols: dict[str, list[tuple[Any, Any]]] = {}
        self.records = 0
        self.sources: Counter[str] = Counter()  # records by where their step came from

    def add_columns(self, name: str, steps: Any, values: Any) -> None:
        self.cols.setdefault(name, []).append((steps, values))


class TemplateEngine:
    def __init__(self, parser: LineParser) -> None:
        self.parser = parser
        self.templates: dict[str, Template] = {}
        self.active: list[Template] = []
        self.refused = 0
        self.silent = 0  # lines taken by templates without metrics (chatter), since last read
        self.bars = 0  # progress-bar redraws taken by templates, since last read
        self.unshaped: set[str] = set()  # exact lines whose shape was refused: not shaped again

    def observe(self, line: str) -> None:
        """Count a line's shape (called for lines that went through the line parsers)."""
        if len(line) > MAX_TEMPLATE_LINE or not line or line in self.unshaped or "\r" in line.rstrip("\r"):
            return  # carriage-return frames never become templates (see build_template)
        key = shape_key(line)
        t = self.templates.get(key)
        if t is None:
            if len(self.templates) >= MAX_TEMPLATES * 8:
                return
            self.templates[key] = Template(regex=None, seen=1)
            return
        t.seen += 1
        if t.seen == 2 and t.regex is None and len(self.active) < MAX_TEMPLATES:
            built = build_template(line, self.parser)
            if built.regex is not None:
                built.seen = t.seen
                self.templates[key] = built
                self.active.append(built)
            else:
                self.refused += 1
        elif t.regex is None and t.seen > 2 and len(self.unshaped) < 4096:
            self.unshaped.add(line)  # a line repeated word for word that no template takes

    @staticmethod
    def _columns(
        t: Template, parts: list[str], stride: int, rows: int, strict: bool = False
    ) -> list[tuple[str, Any]]:
        import numpy as np

        assert t.step_slot is not None

        def column(g: int) -> Any:
            cells = parts[1 + g :: stride]
            convert = _grouped_float if strict or g in t.grouped else float
            return np.fromiter(map(convert, cells), np.float64, rows)

        return [("", column(t.step_slot))] + [(name, column(g)) for g, name in t.slots]

    def consume(self, block: str, sink: BlockSink) -> str:
        """Take every line matching an active template out of `block`; return the rest."""
        rest = "\n" + block  # every line now begins with a newline (see _compile)
        self.active.sort(key=lambda t: -t.hits)
        tried = 0
        for t in list(self.active):
            if len(rest) <= 1:
                break
            if t.idle_blocks > 4 and t.idle_blocks % 8:
                t.idle_blocks += 1
                continue
            tried += 1
            if tried > MAX_ACTIVE:
                break
            assert t.regex is not None and t.strict is not None
            parts = t.regex.split(rest)
            if len(parts) == 1:
                t.idle_blocks += 1
                continue
            t.idle_blocks = 0
            stride = t.groups + 1
            rows = (len(parts) - 1) // stride
            cols: list[tuple[str, Any]] = []
            if t.slots:
                assert t.step_slot is not None
                try:
                    cols = self._columns(t, parts, stride, rows)
                except ValueError:  # the fast regex caught a non-number: redo this block strictly
                    parts = t.strict.split(rest)
                    rows = (len(parts) - 1) // stride
                    if rows == 0:
                        continue
                    cols = self._columns(t, parts, stride, rows, strict=True)
                steps = cols.pop(0)[1]
                for name, values in cols:
                    sink.add_columns(name, steps, values)
                sink.records += rows
                sink.sources[t.source] += rows
            elif t.source.startswith("tqdm position/"):
                rest, rows = keep_next_to_others(t.regex, rest)
                t.hits += rows
                self.bars += rows
                continue
            else:
                self.silent += rows
            t.hits += rows
            rest = "".join(parts[0::stride])
        return rest[1:] if rest.startswith("\n") else rest

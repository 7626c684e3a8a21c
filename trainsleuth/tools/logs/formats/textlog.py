"""Console logs and metric text files, read in blocks of whole lines.

Lines matching a learnt template are parsed a block at a time (`fastpath`); the rest go through
the line parsers (`textparse`) one by one, with Megatron records wrapped over several lines joined
and every line with an error word shown to the error scanner."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from trainsleuth.tools.logs import skips
from trainsleuth.tools.logs.collect import Collector
from trainsleuth.tools.logs.errors import has_trigger, next_scale
from trainsleuth.tools.logs.fastpath import BlockSink, LineParser, TemplateEngine
from trainsleuth.tools.logs.numbers import to_float
from trainsleuth.tools.logs.roles import role_of
from trainsleuth.tools.logs.skips import LineFilter
from trainsleuth.tools.logs.source import MAX_LINE, ReadContext, ReadStats, iter_blocks
from trainsleuth.tools.logs.textparse import (
    _BAR_POS,
    _MEGATRON,
    _TQDM,
    LINE_PARSERS,
    Record,
    bar_total,
    clean_line,
    has_digit,
    parse_dict_line,
    parse_megatron,
    pick_step,
    with_step_key,
)


def _redraws_only(line: str) -> bool:
    """A line of tqdm redraws and nothing else (no postfix values, no dict between the frames)."""
    return (
        line.endswith(("it/s]", "s/it]", "it/s]\x1b[A", "s/it]\x1b[A"))
        and "=" not in line
        and "{" not in line
        and ": " not in line
    )


# a cell of a column table: `12`, `2/60`, `6.949`, `0G`, `128:`
_CELL = re.compile(r"^([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)(?:/(\d+))?([A-Za-z%]{0,3}):?$")
_COLUMN_ROLES = {"loss", "loss_component", "val_loss", "accuracy", "val_accuracy", "grad_norm", "lr"}


class _LineState:
    """The line-by-line parser for lines no template took: Megatron records wrapped over several
    lines are joined, what is not a metric record (a printed script, settings, a config dump, a
    bare progress bar) is set aside and counted, and each complete line's shape is shown to the
    template engine."""

    def __init__(self, parser: LineParser, megatron_ok: bool, sink: _Sink, engine: TemplateEngine | None,
                 stats: ReadStats) -> None:  # fmt: skip
        self.parser = parser
        self.megatron_ok = megatron_ok
        self.sink = sink
        self.engine = engine
        self.stats = stats
        self.filter = LineFilter()
        self.units = sink.collector.units
        self.pending: str | None = None
        self.pending_n = 0
        self.long_lines = 0
        self.table: dict[str, float] = {}  # rows of a key | value table (SB3) not yet a record
        self.columns: list[str] | None = None  # the last column header (`Epoch GPU_mem box_loss ...`)
        self.main_total = 0  # the largest progress-bar total seen: the training bar
        self.held: list[Record] = []  # records printed between bar frames, waiting for the bar's step

    def feed(self, line: str, kind: str | None = None, step: float | None = None) -> None:
        """One line no template took. `kind`: what the error scanner made of it ("error", an
        fp16 "overflow" notice, or None)."""
        if len(line) > MAX_LINE:
            self.long_lines += 1
            return
        if self.megatron_ok:
            if self.pending is not None:
                s = clean_line(line)
                if not s or self.pending_n >= 4 or _MEGATRON.search(s):
                    self.flush()
                else:
                    self.pending += " " + s
                    self.pending_n += 1
                    if s.endswith("|"):
                        self.flush()
                    return
            if "iteration" in line and "|" in line:
                s = clean_line(line)
                if not s.endswith("|") and _MEGATRON.search(s):
                    self.pending, self.pending_n = s, 0
                    return
        flt = self.filter
        if kind == "error":
            self.stats.skip(skips.ERROR, line)
            return
        if kind == "overflow":  # counted by the error scanner; its numbers are the scale, nothing else
            scale = next_scale(line)
            if scale is not None:
                self.sink.add_record(step, {"loss scale": scale}, "the step line before the notice")
            else:
                self.stats.skip(skips.OVERFLOW, line)
            return
        if flt.is_settings(line):
            self._drop_settings()
            self.stats.skip(skips.SETTINGS, line)
            return
        if flt.script_ends(line):
            return
        digits = has_digit(line)  # a line without a digit holds no record
        if flt.in_script or flt.script_starts(line):
            recs = self.parser(line) if digits else []
            if not any(step is not None and metrics for step, metrics, _ in recs):
                self.stats.skip(skips.SCRIPT, line)
                return
            flt.in_script = False  # a stepped record: the log proper begins
        else:
            recs = self.parser(line, self.units) if digits else []
            if not recs:
                if not digits:
                    self._column_header(line)
                elif self.columns is not None:
                    recs = self._column_values(line)
        parsed = bool(recs)
        recs = self._context(recs, line)
        # a config dump comes before training: after the first step, lone `key = value` lines are records
        key = flt.setting_key(line, recs) if self.sink.collector.last_step is None else None
        if key is not None and key not in flt.pending_keys:
            flt.pending.append((line, recs))
            flt.pending_keys.add(key)
            return
        if flt.pending and not recs and flt.is_neutral(line):
            flt.neutral += 1
            return
        self._drop_settings(repeated=key is not None)
        if key is not None:  # a setting repeated: a metric printed alone after all
            flt.pending.append((line, recs))
            flt.pending_keys.add(key)
            return
        if recs:
            add = self.sink.add_record
            for step, metrics, source in recs:
                add(step, metrics, source)
        elif not parsed and digits:
            self.stats.skip(skips.PROGRESS if _TQDM.search(line) else skips.NO_METRIC, line)
        if self.engine is not None:
            self.engine.observe(line)

    def _column_header(self, line: str) -> None:
        """A line of column names (Ultralytics: `Epoch GPU_mem box_loss cls_loss dfl_loss Instances
        Size`): the names of the values on the lines that follow."""
        if "loss" not in line and "acc" not in line and "Loss" not in line:
            return  # a header names at least one loss or accuracy column
        names = clean_line(line).split()
        if len(names) >= 3 and any(role_of(n) in _COLUMN_ROLES for n in names):
            self.columns = names

    def _column_values(self, line: str) -> list[Record]:
        """Values under the last column header: the last progress frame of the line whose first
        token is a number (`2/60 0G 5.886 4.054 3.787 51 128: 100% ...` -> Epoch 2, box_loss 5.886, ...)."""
        names = self.columns or []
        frames = [f.split() for f in clean_line(line).split("\r")]
        row = next((toks for toks in reversed(frames) if toks and _CELL.match(toks[0])), None)
        if row is None:
            return []
        metrics: dict[str, float] = {}
        step: float | None = None
        for name, cell in zip(names, row, strict=False):
            m = _CELL.match(cell)
            if m is None:
                break
            if m.group(2) is not None:  # `2/60`: a position and its total
                if step is None:
                    step = float(m.group(1))
                continue
            v = to_float(m.group(1))
            if v is None:
                break
            metrics[name] = v
            if m.group(3):
                self.units[name] = m.group(3)
        if len(metrics) < 2:
            return []
        return [(step, metrics, f"{names[0]} column" if step is not None else "")]

    def bars_then_dict(self, line: str) -> bool:
        """The HF Trainer's line: tqdm redraws, then the dict it logged (`\r 2%|..| 10/600 [..]\r
        \r{'loss': 4.03, ...}`). Read straight (only the first and last redraws matter); returns
        False, reading nothing, for any line of another shape."""
        j = line.rfind("\r{")
        if j <= 0 or not line.endswith("}") or self.pending is not None or self.filter.in_script:
            return False
        head = line[:j]
        if "=" in head or "{" in head or ": " in head:  # not only redraws before the dict
            return False
        dict_recs = parse_dict_line(line[j + 1 :])
        if not dict_recs:
            return False
        recs: list[Record] = []
        second = head.find("\r", 1)
        first = head[1:second] if second > 0 else head[1:]
        m = _BAR_POS.search(first)
        if m is not None:
            recs.append((float(m.group(1)), {}, f"tqdm position/{m.group(2)}"))
        k = head.rfind("%|")
        if second > 0 and k > second:
            end = head.find("\r", k)
            m = _BAR_POS.search(head, k, end if end >= 0 else len(head))
            if m is not None:
                recs.append((float(m.group(1)), {}, f"tqdm position/{m.group(2)}"))
        for step, metrics, source in self._context(recs + dict_recs, line):
            self.sink.add_record(step, metrics, source)
        return True

    def redraws(self, line: str) -> None:
        """A physical line made only of progress-bar redraws: its first redraw may give the step of
        records printed before it, its last one is the step context for what follows."""
        second = line.find("\r", 1)
        first_frame = line[1:second] if second > 0 else line[1:]
        last_frame = line[line.rfind("\r") + 1 :]
        recs: list[Record] = []
        for frame in (first_frame, last_frame) if second > 0 else (first_frame,):
            m = _BAR_POS.search(frame)
            if m is not None:
                recs.append((float(m.group(1)), {}, f"tqdm position/{m.group(2)}"))
        for step, metrics, source in self._context(recs, line):
            self.sink.add_record(step, metrics, source)  # records held for this bar's step
        self.stats.skip(skips.PROGRESS, count=max(0, line.count("\r") - len(recs)))

    def _context(self, recs: list[Record], line: str) -> list[Record]:
        """Records that set context rather than being records themselves: a bare progress bar
        (the training bar's position is the step of what is printed between its frames, e.g. the
        HF Trainer's dicts), an epoch heading, the rows of a key | value table (one record per
        table, SB3)."""
        if not recs and not self.table and not self.held:
            return recs
        out: list[Record] = []
        sink = self.sink
        saw_bar = held_now = False
        table_rows = 0
        for rec in recs:
            step, metrics, source = rec
            if source == "table row":
                self.table.update(metrics)
                table_rows += 1
                continue
            if metrics:
                if step is None and (saw_bar or self.held):
                    self.held.append(rec)  # printed between bar frames: the next frame has its step
                    held_now = True
                else:
                    out.append(rec)
                continue
            total = bar_total(source)
            if total is None:  # an epoch heading: the step of the records that follow
                sink.add_record(step, {}, source)
                continue
            self.stats.skip(skips.PROGRESS, line)
            if total >= self.main_total:
                self.main_total = total
                saw_bar = True
                if self.held and step is not None:
                    out += [(step, m, "the training progress bar") for _, m, _ in self.held]
                    self.held = []
                sink.add_record(step, {}, "the training progress bar")
        if self.held and not saw_bar and not held_now:
            out = [*self.held, *out]  # no bar followed: they keep the last step seen
            self.held = []
        if self.table and not table_rows:
            metrics, self.table = self.table, {}
            step, source = pick_step(metrics)
            out.insert(0, (step, metrics, source or "table"))
        return out

    def _drop_settings(self, repeated: bool = False) -> None:
        """End a pending run of lone settings: a config dump when it holds enough distinct keys
        and is not ended by one of them again (set aside), else ordinary records (kept, in order)."""
        flt = self.filter
        if not flt.pending:
            return
        pending, flt.pending, flt.pending_keys, flt.neutral = flt.pending, [], set(), 0
        if len(pending) >= skips.CONFIG_BLOCK_MIN and not repeated:
            for line, _ in pending:
                self.stats.skip(skips.CONFIG, line)
            return
        for _line, recs in pending:
            for step, metrics, source in recs:
                self.sink.add_record(step, metrics, source)

    def flush(self) -> None:
        if self.pending is not None:
            for step, metrics, source in parse_megatron(self.pending):
                self.sink.add_record(step, metrics, source)
            self.pending = None
        self._drop_settings()
        for step, metrics, source in self._context([], ""):
            self.sink.add_record(step, metrics, source)
        for step, metrics, source in self.held:
            self.sink.add_record(step, metrics, source)
        self.held = []


class _Sink(BlockSink):
    """One block's columns (fast path) and records (line path), merged into the series in step
    order when a metric got values from both."""

    def __init__(self, collector: Collector, prefix: str) -> None:
        super().__init__()
        self.collector = collector
        self.prefix = prefix
        self.slow: dict[str, tuple[list[float], list[float]]] = {}
        self.positional: set[str] = set()
        # the step of the line now being read, from the lines before it in the block (set when
        # templates took lines out of the block: their steps reach the collector only at its end)
        self.step_here: Callable[[], float | None] | None = None

    def add_record(self, step: float | None, metrics: dict[str, float], source: str = "") -> None:
        c = self.collector
        if step is None and metrics and self.step_here is not None:
            step = self.step_here()  # a header line taken by a template holds this record's step
            source = source if step is None else "the step line before the record"
        if not metrics:  # a position alone (`Epoch 3/20`): what later records without a step get
            if step is not None and step == step:
                c.last_step = step
            return
        c.records += 1
        step, positional = c.step_for(step, source)
        if positional:
            self.positional.update(metrics)
        slow = self.slow
        for name, value in metrics.items():
            cols = slow.get(name)
            if cols is None:
                cols = slow[name] = ([], [])
            cols[0].append(step)
            cols[1].append(value)

    def flush_block(self) -> None:
        import numpy as np

        c = self.collector
        c.records += self.records
        c.step_sources.update(self.sources)
        last: float | None = None
        for name, (st, vals) in self.slow.items():
            self.cols.setdefault(name, []).append(
                (np.asarray(st, dtype=np.float64), np.asarray(vals, dtype=np.float64))
            )
        for name, chunks in self.cols.items():
            if len(chunks) == 1:
                steps, values = chunks[0]
            else:
                steps = np.concatenate([ch[0] for ch in chunks])
                values = np.concatenate([ch[1] for ch in chunks])
                order = np.argsort(steps, kind="stable")
                steps, values = steps[order], values[order]
            if len(steps):
                top = float(steps[-1])
                last = top if last is None else max(last, top)
            c.add_columns(self.prefix + name, name, steps, values, positional=name in self.positional,
                          run_prefix=self.prefix.endswith("/"))  # fmt: skip
        if last is not None and self.records:
            c.last_step = last if c.last_step is None else max(c.last_step, last)
        self.cols = {}
        self.slow = {}
        self.records = 0
        self.sources.clear()
        self.positional = set()


# `iteration 100/`, `step=10`, `step 100:`, `global_step=5`, `iter 3:`, llm.c's `s:120`
_QUICK_STEP = re.compile(r"(?:\biteration\s+|\b(?:global_)?step\s*[=:]?\s*|\biter\s+|^s:)(\d+)\b")


class _StepsBefore:
    """The step of the nearest line before a position in a block that has one (an error line's
    step: the last step logged before it). Each line is parsed at most once per block, so runs of
    error or overflow lines cost no more than the lines themselves."""

    def __init__(self, text: str, parser: LineParser, quick: bool = True) -> None:
        self.text, self.parser, self.quick = text, parser, quick
        self.line_step: dict[int, float | None] = {}  # line start -> its own step (or None)

    def lazy(self, pos: int, fallback: float | None) -> Callable[[], float | None]:
        return lambda: self.before(pos, fallback) if pos >= 0 else fallback

    def before(self, pos: int, fallback: float | None) -> float | None:
        text, end = self.text, pos
        for _ in range(30):
            if end <= 0:
                break
            start = text.rfind("\n", 0, end - 1) + 1
            if start not in self.line_step:
                line = text[start : end - 1] if end - 1 > start else ""
                found = None
                if has_digit(line) and not has_trigger(line):  # error and overflow lines carry no step
                    m = _QUICK_STEP.search(line) if self.quick else None
                    if m is not None:  # the usual step spellings, without parsing the whole line
                        found = float(m.group(1))
                    else:
                        found = next((st for st, _m, _s in self.parser(line) if st is not None), None)
                self.line_step[start] = found
            if self.line_step[start] is not None:
                return self.line_step[start]
            end = start
        return fallback


class _Locator:
    """Finds a line of the block in the block's text (lines come in order, so each search starts
    after the last line found) and, on demand, the step of the nearest line before it."""

    def __init__(self, text: str, steps_before: _StepsBefore) -> None:
        self.text, self.steps_before, self.find_from = text, steps_before, 0
        self.line = ""  # the line being read (set by read_text)

    def step(self) -> float | None:
        pos = self.text.find(self.line, self.find_from)
        if pos < 0:
            return None
        self.find_from = pos + len(self.line)
        return self.steps_before.before(pos, None)


def read_text(path: Path, fmt: str, ctx: ReadContext, size: int, prefix: str = "") -> None:
    parser = LINE_PARSERS.get(fmt, LINE_PARSERS["auto"])
    if ctx.step_key:
        parser = with_step_key(parser, ctx.step_key)
    sink = _Sink(ctx.collector, prefix)
    engine = TemplateEngine(parser)
    state = _LineState(parser, fmt in ("auto", "megatron"), sink, engine, ctx.stats)
    scanner = ctx.errors
    line_no = 1
    counted_lines = ctx.stats.lines  # `decode` counts each block's lines as it yields it
    for text in iter_blocks(path, ctx, size):
        block_lines = ctx.stats.lines - counted_lines
        counted_lines = ctx.stats.lines
        rest = engine.consume(text, sink) if engine.active else text
        if rest:
            # Templates never take a line with an error word, so error lines are all here; their
            # line numbers are found in the block only when one turns up.
            find_from, counted_to, counted = 0, 0, 0
            steps_before = _StepsBefore(text, parser, quick=not ctx.step_key)
            located = _Locator(text, steps_before) if len(rest) != len(text) else None
            sink.step_here = located.step if located is not None else None
            for line in rest.split("\n")[:-1]:
                if located is not None:
                    located.line = line
                if line[:1] == "\r" and not ctx.step_key:
                    if _redraws_only(line):
                        state.redraws(line)  # a line of progress-bar redraws: only its bars' positions
                        continue
                    if state.bars_then_dict(line):
                        continue
                kind = None
                if has_trigger(line):
                    pos = text.find(line, find_from)
                    if pos >= 0:
                        counted += text.count("\n", counted_to, pos)
                        counted_to = find_from = pos
                        find_from = pos + len(line)
                    fallback = ctx.collector.last_step
                    seen = len(scanner.overflow_steps)
                    kind = scanner.scan(line, line_no + counted, steps_before.lazy(pos, fallback))
                    if kind == "overflow" and len(scanner.overflow_steps) > seen:
                        state.feed(line, kind, scanner.overflow_steps[-1])  # the step the scanner found
                        continue
                state.feed(line, kind)
        line_no += block_lines
        sink.step_here = None
        sink.flush_block()
        if engine.silent:  # lines a template took that hold no metric
            ctx.stats.skip(skips.NO_METRIC, count=engine.silent)
            engine.silent = 0
        if engine.bars:
            ctx.stats.skip(skips.PROGRESS, count=engine.bars)
            engine.bars = 0
    state.flush()
    sink.flush_block()
    ctx.stats.long_lines_skipped += state.long_lines

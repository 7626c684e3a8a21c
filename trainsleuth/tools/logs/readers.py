"""Find what a path holds and stream it into a Collector: text logs line by line, CSV/TSV,
HF `trainer_state.json`, TensorBoard event files (with tensorboard's own reader), MLflow run
folders. Memory stays bounded by the kept points: files are read line by line with a cap on
line length, never loaded whole (except `trainer_state.json`, which is size-checked first)."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainsleuth.tools.logs.collect import Collector
from trainsleuth.tools.logs.errors import ErrorScanner, has_trigger
from trainsleuth.tools.logs.fastpath import BlockSink, LineParser, TemplateEngine
from trainsleuth.tools.logs.textparse import (
    _MEGATRON,
    LINE_PARSERS,
    clean_line,
    parse_megatron,
    pick_step,
    to_float,
)

MAX_LINE = 1 << 20  # longer lines are skipped (counted), never held whole
BLOCK = 8 << 20  # text logs are read in blocks of whole lines
MAX_JSON_FILE = 256 << 20
MAX_DIR_ENTRIES = 20000
MAX_LOG_FILES = 50

FORMATS = (
    "auto",
    "jsonl",
    "csv",
    "tsv",
    "hf_dict",
    "trainer_state",
    "keyvalue",
    "megatron",
    "nanogpt",
    "tqdm",
    "tensorboard",
    "mlflow",
    "markdown",
)

TEXT_SUFFIXES = {".log", ".txt", ".out", ".err", ".jsonl", ".json", ".csv", ".tsv", ".md", ".ndjson", ""}


class LogInputError(Exception):
    """The input cannot be analysed; the message says why and what to do instead."""

    def __init__(self, message: str, next_step: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.next_step = next_step


@dataclass
class ReadStats:
    format: str = "unknown"
    files: list[str] = field(default_factory=list)
    bytes_read: int = 0
    lines: int = 0
    long_lines_skipped: int = 0
    undecodable_lines: int = 0
    binary: bool = False
    notes: list[str] = field(default_factory=list)
    reader: str = ""  # which CSV reader read the file: "pyarrow" (fast path) or "python"


Progress = Callable[[int, int, str], None]


@dataclass
class ReadContext:
    collector: Collector
    errors: ErrorScanner
    stats: ReadStats
    progress: Progress | None = None
    cancel: threading.Event | None = None

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise LogInputError("the analysis was cancelled")


# ---------------------------------------------------------------------------- dispatch


def read_path(path: Path, fmt: str, ctx: ReadContext) -> None:
    if fmt not in FORMATS:
        raise LogInputError(f"unknown format {fmt!r}", f"use one of: {', '.join(FORMATS)}")
    try:
        st = path.stat()
    except PermissionError as exc:
        raise LogInputError(f"{path}: permission denied ({exc.strerror})", "make the file readable") from None
    except OSError as exc:
        raise LogInputError(f"{path}: cannot be read ({exc.strerror or exc})", "check the path") from None
    if stat.S_ISDIR(st.st_mode):
        _read_dir(path, fmt, ctx)
        return
    if not stat.S_ISREG(st.st_mode):
        raise LogInputError(
            f"{path} is not a regular file (a FIFO, socket or device); it cannot be analysed as a log",
            "save the log to a regular file and pass that file",
        )
    _read_file(path, fmt, ctx, st.st_size)


def _open(path: Path) -> io.BufferedReader:
    try:
        return open(path, "rb")
    except PermissionError as exc:
        raise LogInputError(
            f"{path}: permission denied ({exc.strerror})",
            "make the file readable by the user running trainsleuth",
        ) from None
    except IsADirectoryError:
        raise LogInputError(f"{path} is a directory", "pass the folder itself or a file inside it") from None
    except OSError as exc:
        raise LogInputError(f"{path}: cannot be opened ({exc.strerror or exc})", "check the path") from None


def _sniff(path: Path) -> bytes:
    with _open(path) as f:
        try:
            return f.read(65536)
        except OSError as exc:
            raise LogInputError(f"{path}: cannot be read ({exc.strerror or exc})", "check the file") from None


def looks_binary(head: bytes) -> bool:
    if not head:
        return False
    if b"\x00" in head[:8192]:
        return True
    sample = head[:8192]
    text_chars = bytes(range(32, 127)) + b"\n\r\t\b\f\x1b"
    nontext = sample.translate(None, text_chars)
    # UTF-8 multibyte text is fine; count only what is not valid UTF-8.
    try:
        sample.decode("utf-8")
        return False
    except UnicodeDecodeError as exc:
        if exc.start >= len(sample) - 4:
            return False
    return len(nontext) / max(1, len(sample)) > 0.3


def _read_file(path: Path, fmt: str, ctx: ReadContext, size: int) -> None:
    name = path.name.lower()
    ctx.stats.files.append(str(path))
    if fmt == "tensorboard" or (fmt == "auto" and "tfevents" in name):
        ctx.stats.format = "tensorboard"
        read_tensorboard([path], ctx, path.parent)
        return
    if fmt == "mlflow":
        raise LogInputError(
            f"{path} is a file; an MLflow run is a folder with metrics/", "pass the run folder"
        )
    if size == 0:
        ctx.stats.format = fmt if fmt != "auto" else "empty"
        ctx.stats.notes.append("the file is empty")
        return
    head = _sniff(path)
    if fmt == "auto" and looks_binary(head):
        ctx.stats.binary = True
        ctx.stats.format = "binary"
        raise LogInputError(
            f"{path} looks like a binary file, not a text log (NUL bytes or mostly non-text bytes)",
            "pass a text log, a CSV/JSON metrics file, a TensorBoard log dir or an MLflow run folder; "
            "or force a text format with format='keyvalue' to scan it anyway",
        )
    if fmt == "trainer_state" or (fmt == "auto" and _is_trainer_state(name, head)):
        ctx.stats.format = "trainer_state"
        read_trainer_state(path, ctx, size)
        return
    if fmt in ("csv", "tsv") or (fmt == "auto" and _is_csv(name, head)):
        ctx.stats.format = fmt if fmt in ("csv", "tsv") else ("tsv" if _delimiter(head) == "\t" else "csv")
        read_csv(path, ctx, size)
        return
    ctx.stats.format = fmt if fmt != "auto" else "text"
    read_text(path, "auto" if fmt == "markdown" else fmt, ctx, size)


def _is_trainer_state(name: str, head: bytes) -> bool:
    if name.endswith("trainer_state.json"):
        return True
    start = head.lstrip()[:1]
    return start == b"{" and b'"log_history"' in head and not head.lstrip().startswith(b'{"')


def _delimiter(head: bytes) -> str:
    first = head.split(b"\n", 1)[0]
    return "\t" if first.count(b"\t") > first.count(b",") else ","


def _is_csv(name: str, head: bytes) -> bool:
    if name.endswith((".csv", ".tsv")):
        return True
    lines = [ln for ln in head.split(b"\n")[:20] if ln.strip()]
    if len(lines) < 2:
        return False
    delim = _delimiter(head).encode()
    header = lines[0].split(delim)
    if len(header) < 2 or any(not h.strip() for h in header):
        return False
    if any(to_float(h.decode("utf-8", "replace")) is not None for h in header):
        return False
    counts = [ln.count(delim) for ln in lines[1:-1] or lines[1:]]
    if not counts or any(c != len(header) - 1 for c in counts):
        return False
    cells = lines[1].split(delim)
    return (
        sum(to_float(c.decode("utf-8", "replace")) is not None or not c.strip() for c in cells)
        >= len(cells) / 2
    )


# ---------------------------------------------------------------------------- text


def iter_lines(path: Path, ctx: ReadContext, size: int) -> Iterator[str]:
    """Decoded lines, each at most MAX_LINE bytes; longer lines are skipped and counted."""
    stats = ctx.stats
    report_every = 1 << 24
    next_report = report_every
    with _open(path) as f:
        readline = f.readline
        while True:
            try:
                raw = readline(MAX_LINE)
            except OSError as exc:
                raise LogInputError(
                    f"{path}: read failed ({exc.strerror or exc})", "check the file"
                ) from None
            if not raw:
                break
            stats.bytes_read += len(raw)
            if len(raw) >= MAX_LINE and not raw.endswith(b"\n"):
                stats.long_lines_skipped += 1
                while True:  # discard the rest of the overlong line
                    rest = readline(MAX_LINE)
                    stats.bytes_read += len(rest)
                    if not rest or rest.endswith(b"\n"):
                        break
                continue
            stats.lines += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                stats.undecodable_lines += 1
                line = raw.decode("utf-8", "replace")
            if stats.bytes_read >= next_report:
                next_report += report_every
                ctx.check_cancel()
                if ctx.progress:
                    ctx.progress(stats.bytes_read, size, "reading log")
            yield line


def iter_blocks(path: Path, ctx: ReadContext, size: int) -> Iterator[str]:
    """Decoded blocks of whole lines (about BLOCK bytes each). A line longer than MAX_LINE is
    never held whole: once a stretch without a newline passes MAX_LINE it is dropped and counted."""
    stats = ctx.stats
    carry = b""
    skipping = False
    next_report = 1 << 26
    block_size = 1 << 16
    with _open(path) as f:
        while True:
            try:
                chunk = f.read(block_size)
                block_size = min(BLOCK, block_size * 4)  # small first blocks: templates are learnt early
            except OSError as exc:
                raise LogInputError(
                    f"{path}: read failed ({exc.strerror or exc})", "check the file"
                ) from None
            if not chunk:
                break
            stats.bytes_read += len(chunk)
            if stats.bytes_read >= next_report:
                next_report += 1 << 26
                ctx.check_cancel()
                if ctx.progress:
                    ctx.progress(stats.bytes_read, size, "reading log")
            if skipping:
                nl = chunk.find(b"\n")
                if nl < 0:
                    continue
                chunk = chunk[nl + 1 :]
                skipping = False
            data = carry + chunk if carry else chunk
            nl = data.rfind(b"\n")
            if nl < 0:
                carry = data
                if len(carry) > MAX_LINE:
                    stats.long_lines_skipped += 1
                    skipping, carry = True, b""
                continue
            carry = data[nl + 1 :]
            if len(carry) > MAX_LINE:
                stats.long_lines_skipped += 1
                skipping, carry = True, b""
            yield _decode(data[: nl + 1], stats)
        if carry and not skipping:
            yield _decode(carry + b"\n", stats)


def _decode(data: bytes, stats: ReadStats) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", "replace")
        stats.undecodable_lines += sum(1 for ln in text.split("\n") if "\ufffd" in ln)
    stats.lines += text.count("\n")
    return text


class _LineState:
    """The line-by-line parser for lines no template took: Megatron records wrapped over
    several lines are joined, and each complete line's shape is shown to the template engine."""

    def __init__(
        self, parser: LineParser, megatron_ok: bool, sink: _Sink, engine: TemplateEngine | None
    ) -> None:
        self.parser = parser
        self.megatron_ok = megatron_ok
        self.sink = sink
        self.engine = engine
        self.pending: str | None = None
        self.pending_n = 0
        self.long_lines = 0

    def feed(self, line: str) -> None:
        if len(line) > MAX_LINE:
            self.long_lines += 1
            return
        add = self.sink.add_record
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
        for step, metrics in self.parser(line):
            add(step, metrics)
        if self.engine is not None:
            self.engine.observe(line)

    def flush(self) -> None:
        if self.pending is not None:
            for step, metrics in parse_megatron(self.pending):
                self.sink.add_record(step, metrics)
            self.pending = None


class _Sink(BlockSink):
    """One block's columns (fast path) and records (line path), merged into the series in step
    order when a metric got values from both."""

    def __init__(self, collector: Collector, prefix: str) -> None:
        super().__init__()
        self.collector = collector
        self.prefix = prefix
        self.slow: dict[str, tuple[list[float], list[float]]] = {}
        self.positional: set[str] = set()

    def add_record(self, step: float | None, metrics: dict[str, float]) -> None:
        c = self.collector
        c.records += 1
        if step is None or step != step:
            if c.last_step is not None:
                step = c.last_step
            else:
                step = float(c.records)
                self.positional.update(metrics)
        else:
            c.last_step = step
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
        self.positional = set()


def _lazy_step(text: str, pos: int, parser: LineParser, fallback: float | None) -> Callable[[], float | None]:
    return lambda: _step_before(text, pos, parser, fallback) if pos >= 0 else fallback


def _step_before(text: str, pos: int, parser: LineParser, fallback: float | None) -> float | None:
    end = pos
    for _ in range(30):
        if end <= 0:
            break
        start = text.rfind("\n", 0, end - 1) + 1
        for step, _m in parser(text[start : end - 1] if end - 1 > start else ""):
            if step is not None:
                return step
        end = start
    return fallback


def read_text(path: Path, fmt: str, ctx: ReadContext, size: int, prefix: str = "") -> None:
    parser = LINE_PARSERS.get(fmt, LINE_PARSERS["auto"])
    sink = _Sink(ctx.collector, prefix)
    engine = TemplateEngine(parser)
    state = _LineState(parser, fmt in ("auto", "megatron"), sink, engine)
    scanner = ctx.errors
    line_no = 1
    for text in iter_blocks(path, ctx, size):
        rest = engine.consume(text, sink) if engine.active else text
        if rest:
            # Templates never take a line with an error word, so error lines are all here; their
            # line numbers are found in the block only when one turns up.
            find_from, counted_to, counted = 0, 0, 0
            for line in rest.split("\n")[:-1]:
                if has_trigger(line):
                    pos = text.find(line, find_from)
                    if pos >= 0:
                        counted += text.count("\n", counted_to, pos)
                        counted_to = find_from = pos
                        find_from = pos + len(line)
                    fallback = ctx.collector.last_step
                    scanner.scan(line, line_no + counted, _lazy_step(text, pos, parser, fallback))
                state.feed(line)
        line_no += text.count("\n")
        sink.flush_block()
    state.flush()
    sink.flush_block()
    ctx.stats.long_lines_skipped += state.long_lines


# ---------------------------------------------------------------------------- CSV


ARROW_MIN_BYTES = 2 << 20  # smaller CSVs are read in pure Python (importing pyarrow costs more)


def read_csv(path: Path, ctx: ReadContext, size: int, prefix: str = "") -> None:
    """CSV/TSV (Lightning and Keras CSVLogger, TensorBoard CSV exports). Large files go through
    pyarrow's streaming CSV reader when it is installed and can read them; everything else (and
    whatever pyarrow refuses: ragged rows, undecodable bytes, text in a numeric column, ...) is read
    by the pure-Python reader, with the same results."""
    if size >= ARROW_MIN_BYTES and read_csv_arrow(path, ctx, size, prefix):
        return
    read_csv_python(path, ctx, size, prefix)


def read_csv_python(path: Path, ctx: ReadContext, size: int, prefix: str = "") -> None:
    """The pure-Python CSV reader. Blocks of rows are split and converted in bulk; a block with
    quoted, text or missing-width cells is read row by row."""
    ctx.stats.reader = "python"
    header: list[str] | None = None
    delim = ","
    step_col = -1
    names: list[str] = []
    for text in iter_blocks(path, ctx, size):
        if header is None:
            pos = 0
            while pos < len(text):
                end = text.find("\n", pos)
                end = len(text) if end < 0 else end
                line = text[pos:end]
                pos = end + 1
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                delim = "\t" if line.count("\t") > line.count(",") else ","
                try:
                    header = [h.strip() for h in next(csv.reader([line.rstrip("\r")], delimiter=delim), [])]
                except csv.Error:
                    header = [h.strip() for h in line.strip().split(delim)]
                break
            if header is None:
                continue
            text = text[pos:]
            names = header
            step_col = _step_column(header)
        if text:
            _csv_block(text, names, delim, step_col, ctx, prefix)


_EMPTY = "-9.87654321e-307"  # stands in for an empty cell during bulk conversion
_EMPTY_VALUE = float(_EMPTY)


def _step_column(header: list[str]) -> int:
    lowered = [h.lower() for h in header]
    for key in ("step", "global_step", "trainer/global_step", "iteration", "iter", "_step", "epoch"):
        if key in lowered:
            return lowered.index(key)
    if len(lowered) >= 2 and lowered[:2] == ["wall time", "step"]:
        return 1
    return -1


def _csv_block(text: str, names: list[str], delim: str, step_col: int, ctx: ReadContext, prefix: str) -> None:
    import numpy as np

    ncol = len(names)
    rows = text.count("\n")
    if rows and '"' not in text and "\r" not in text and ncol > 1:
        body = text
        empty = delim + delim
        if empty in body or ("\n" + delim) in body or (delim + "\n") in body or body.startswith(delim):
            body = "\n" + body
            while empty in body:
                body = body.replace(empty, delim + _EMPTY + delim)
            body = body.replace("\n" + delim, "\n" + _EMPTY + delim).replace(
                delim + "\n", delim + _EMPTY + "\n"
            )[1:]
        tokens = body.replace("\n", delim).split(delim)
        if tokens and tokens[-1] == "":
            tokens.pop()
        if len(tokens) == rows * ncol:
            try:
                table = np.fromiter(map(float, tokens), np.float64, len(tokens)).reshape(rows, ncol)
            except ValueError:
                table = None
            if table is not None:
                collector = ctx.collector
                if step_col >= 0:
                    steps = table[:, step_col]
                    positional = bool((~np.isfinite(steps) | (steps == _EMPTY_VALUE)).any())
                    if positional:
                        steps = np.arange(
                            collector.records + 1, collector.records + rows + 1, dtype=np.float64
                        )
                else:
                    steps = np.arange(collector.records + 1, collector.records + rows + 1, dtype=np.float64)
                    positional = True
                for i, name in enumerate(names):
                    if i == step_col:
                        continue
                    col = table[:, i]
                    keep = col != _EMPTY_VALUE  # empty cells (Lightning's sparse columns) are not values
                    if keep.any():
                        collector.add_columns(
                            prefix + name, name, steps[keep], col[keep], positional=positional
                        )
                collector.records += rows
                if not positional and rows:
                    collector.last_step = float(np.nanmax(steps))
                return
    add = ctx.collector.add
    for row in _csv_rows(iter(text.split("\n")[:-1]), delim):
        step = None
        if 0 <= step_col < len(row):
            step = to_float(row[step_col])
        metrics: dict[str, float] = {}
        for i in range(min(ncol, len(row))):
            if i == step_col:
                continue
            cell = row[i]
            if not cell:
                continue
            fv = to_float(cell)
            if fv is not None:
                metrics[names[i]] = fv
        if metrics:
            add(step, metrics, prefix)


def _csv_rows(lines: Iterator[str], delim: str) -> Iterator[list[str]]:
    reader = csv.reader((ln.replace("\r", "") for ln in lines), delimiter=delim)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error:
            continue
        yield row


class _ArrowFallback(Exception):
    """The fast path cannot give the pure-Python reader's result for this file."""


class _CountingFile(io.RawIOBase):
    """The file as pyarrow reads it. On the way it counts bytes and lines (for ReadStats) and
    replays the pure-Python reader's blocking (`iter_blocks`: reads of 64 KiB, 256 KiB, ... 8 MiB,
    each cut at its last newline): `blocks` gets, per block, the number of data rows up to its end
    and whether it holds a quote or a carriage return (which send it row by row there). So the fast
    path feeds the series the same chunks, and its results are the same."""

    def __init__(self, f: io.BufferedReader, header_len: int) -> None:
        super().__init__()
        self.f = f  # positioned after the header line (header_len bytes), which pyarrow never sees
        self.bytes = header_len
        self.lines = 1
        self.last = b"\n"
        self.blocks: list[tuple[int, bool]] = []
        self.eof = False
        self._read_size = 1 << 16
        self._next_cut = 1 << 16
        self._open_start = 0  # first byte of the block being filled
        self._last_nl = header_len - 1  # offset of the last newline seen
        self._nl_at_last = 1  # newlines up to and including it
        self._dirty_head = False  # a quote/CR in [open_start, last_nl]
        self._dirty_tail = False  # a quote/CR after last_nl

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        if not data:
            self._finish()
            return data
        if self.last == b"\n" and data[:1] in (b"\n", b"\r"):
            raise _ArrowFallback  # a blank line (pyarrow skips it, the Python reader does not)
        if b"\n\n" in data or b"\n\r\n" in data:
            raise _ArrowFallback
        if self.last == b"\r" and data[:1] != b"\n":
            raise _ArrowFallback  # a lone carriage return ends a row for pyarrow only
        cr = data.count(b"\r")
        if cr and cr != data.count(b"\r\n") + (1 if data.endswith(b"\r") else 0):
            raise _ArrowFallback
        marked = bool(cr) or b'"' in data  # only then is each block searched for quotes and CRs
        pos = 0
        while pos < len(data):
            cut = pos + self._next_cut - self.bytes
            end = min(len(data), cut)
            self._segment(data, pos, end, marked)
            if end == cut:
                self._cut()
            pos = end
        self.last = data[-1:]
        return data

    def _segment(self, data: bytes, a: int, b: int, marked: bool) -> None:
        k = data.rfind(b"\n", a, b)
        if k >= 0:
            if marked:
                self._dirty_head |= self._dirty_tail or _marked(data, a, k + 1)
                self._dirty_tail = _marked(data, k + 1, b)
            else:
                self._dirty_head |= self._dirty_tail
                self._dirty_tail = False
            n = data.count(b"\n", a, k + 1)
            self._nl_at_last += n
            self.lines += n
            self._last_nl = self.bytes + k - a
        elif marked:
            self._dirty_tail |= _marked(data, a, b)
        self.bytes += b - a

    def _cut(self) -> None:
        if self._last_nl >= self._open_start:
            self.blocks.append((self._nl_at_last - 1, self._dirty_head))
            self._open_start = self._last_nl + 1
            self._dirty_head = False
        if self.bytes - self._open_start > MAX_LINE:
            raise _ArrowFallback  # the Python reader skips overlong lines
        self._read_size = min(BLOCK, self._read_size * 4)
        self._next_cut = self.bytes + self._read_size

    def _finish(self) -> None:
        if self.eof:
            return
        self.eof = True
        self._cut()
        if self.bytes > self._open_start:  # a last line without a newline: a block of its own
            self.blocks.append((self._nl_at_last, self._dirty_tail))

    def readinto(self, b: Any) -> int:  # pragma: no cover - pyarrow calls read()
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


def _marked(data: bytes, a: int, b: int) -> bool:
    return data.find(b'"', a, b) >= 0 or data.find(b"\r", a, b) >= 0


def _arrow_header(head: bytes) -> tuple[list[str], str, dict[int, bool], int] | None:
    """Header, delimiter and, per column, whether the first rows hold text (cells `float` cannot
    read); None when the header is not the file's first line or the head is not clean UTF-8."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = text.split("\n")
    if len(lines) < 2:
        return None
    first = lines[0]
    if not first.strip() or first.lstrip().startswith("#"):
        return None
    delim = "\t" if first.count("\t") > first.count(",") else ","
    try:
        header = [h.strip() for h in next(csv.reader([first.rstrip("\r")], delimiter=delim), [])]
    except csv.Error:
        return None
    text_cols: dict[int, bool] = {}
    body = [ln.replace("\r", "") for ln in lines[1:-1] if ln.strip()]
    for row in _csv_rows(iter(body), delim):
        for i, cell in enumerate(row[: len(header)]):
            if not cell or text_cols.get(i):
                continue
            try:
                float(cell)
            except ValueError:
                text_cols[i] = True
    return header, delim, text_cols, len(first.encode()) + 1


def read_csv_arrow(path: Path, ctx: ReadContext, size: int, prefix: str = "") -> bool:
    """The fast CSV path: pyarrow's streaming reader (`pyarrow.csv.open_csv`, block by block,
    multi-threaded), columns converted in C and fed to the series in bulk. Memory is bounded by a
    few blocks plus the kept points. Gives exactly what `read_csv_python` gives; returns False
    (having changed nothing) when pyarrow is missing or the file needs the pure-Python reader."""
    try:
        import pyarrow as pa
        import pyarrow.compute
        import pyarrow.csv as pacsv
    except ImportError:
        return False
    parsed = _arrow_header(_sniff(path))
    if parsed is None:
        return False
    header, delim, text_cols, header_len = parsed
    ncol = len(header)
    if ncol < 2 or len(set(header)) != ncol:
        return False
    real = ctx.collector
    staged = Collector(real.capacity, real.wanted)
    staged.records, staged.last_step = real.records, real.last_step
    stats = ReadStats()
    sub = ReadContext(staged, ctx.errors, stats, ctx.progress, ctx.cancel)
    try:
        _arrow_stream(pa, pacsv, path, sub, size, prefix, header, delim, text_cols, header_len)
    except (_ArrowFallback, pa.ArrowException, UnicodeDecodeError, ValueError):
        return False
    if any(name in real.series for name in staged.series):
        return False
    from trainsleuth.tools.logs.collect import MAX_SERIES

    for name, s in staged.series.items():
        if len(real.series) >= MAX_SERIES:
            if len(real.dropped_series) < 50:
                real.dropped_series.add(name)
            continue
        real.series[name] = s
    for name in staged.dropped_series:
        if len(real.dropped_series) < 50:
            real.dropped_series.add(name)
    real.records, real.last_step = staged.records, staged.last_step
    real.position_steps = real.position_steps or staged.position_steps
    ctx.stats.bytes_read += stats.bytes_read
    ctx.stats.lines += stats.lines
    ctx.stats.reader = "pyarrow"
    return True


def _arrow_stream(pa: Any, pacsv: Any, path: Path, ctx: ReadContext, size: int, prefix: str,
                  header: list[str], delim: str, text_cols: dict[int, bool], header_len: int) -> None:  # fmt: skip
    import numpy as np

    ncol = len(header)
    step_col = _step_column(header)
    cols = [f"c{i}" for i in range(ncol)]
    read_opts = pacsv.ReadOptions(column_names=cols, block_size=1 << 20, use_threads=True)
    parse_opts = pacsv.ParseOptions(delimiter=delim, quote_char='"', double_quote=True, escape_char=False,
                                    newlines_in_values=False, ignore_empty_lines=True)  # fmt: skip
    conv_opts = pacsv.ConvertOptions(
        column_types={c: (pa.string() if text_cols.get(i) else pa.float64()) for i, c in enumerate(cols)},
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=True,
        check_utf8=True,
    )
    # rows read but not yet given to the series: per column, chunks of float arrays (NaN where a
    # cell is empty) with a mask of non-empty cells, or lists of strings (None where empty)
    pending: list[list[Any]] = [[] for _ in range(ncol)]
    pending_masks: list[list[Any]] = [[] for _ in range(ncol)]
    pending_rows = 0
    done_rows = 0
    next_report = 1 << 26

    def take(upto: int) -> None:
        nonlocal pending_rows, done_rows
        k = upto - done_rows
        if k <= 0:
            return
        block: list[Any] = []
        masks: list[Any] = []
        for i in range(ncol):
            if text_cols.get(i):
                joined = [x for chunk in pending[i] for x in chunk]
                block.append(joined[:k])
                pending[i] = [joined[k:]]
                masks.append(None)
            else:
                chunks, mchunks = pending[i], pending_masks[i]
                vals = np.concatenate(chunks) if len(chunks) > 1 else chunks[0]
                if any(m is not None for m in mchunks):
                    full = [
                        np.ones(len(c), bool) if m is None else m
                        for c, m in zip(chunks, mchunks, strict=True)
                    ]
                    mask = np.concatenate(full) if len(full) > 1 else full[0]
                    masks.append(mask[:k])
                    pending_masks[i] = [mask[k:]]
                else:
                    masks.append(None)
                    pending_masks[i] = [None]
                block.append(vals[:k])
                pending[i] = [vals[k:]]
        pending_rows -= k
        done_rows = upto
        dirty = counting_blocks_dirty[0]
        _arrow_block(block, masks, k, dirty, header, step_col, text_cols, ctx, prefix)

    counting_blocks_dirty = [False]
    with _open(path) as raw:
        raw.seek(header_len)
        counting = _CountingFile(raw, header_len)
        reader = pacsv.open_csv(counting, read_options=read_opts, parse_options=parse_opts,
                                convert_options=conv_opts)  # fmt: skip
        seen = 0

        def drain() -> None:
            nonlocal seen
            while seen < len(counting.blocks) and counting.blocks[seen][0] <= done_rows + pending_rows:
                rows_end, dirty = counting.blocks[seen]
                seen += 1
                counting_blocks_dirty[0] = dirty
                take(rows_end)

        for batch in reader:
            ctx.check_cancel()
            if ctx.progress and counting.bytes >= next_report:
                next_report += 1 << 26
                ctx.progress(counting.bytes, size, "reading CSV")
            n = batch.num_rows
            if not n:
                continue
            for i in range(ncol):
                arr = batch.column(i)
                if text_cols.get(i):
                    pending[i].append(arr.to_pylist())
                else:
                    pending[i].append(arr.to_numpy(zero_copy_only=False))
                    pending_masks[i].append(
                        arr.is_valid().to_numpy(zero_copy_only=False) if arr.null_count else None
                    )
            pending_rows += n
            drain()
        if not counting.eof:
            raise _ArrowFallback
        drain()
    if pending_rows:
        raise _ArrowFallback  # the blocks and pyarrow's rows do not line up
    ctx.stats.bytes_read += counting.bytes
    ctx.stats.lines += counting.lines + (0 if counting.last == b"\n" else 1)


def _arrow_block(block: list[Any], masks: list[Any], rows: int, dirty: bool, header: list[str], step_col: int,
                 text_cols: dict[int, bool], ctx: ReadContext, prefix: str) -> None:  # fmt: skip
    """One block of the Python reader, given the same treatment: converted in bulk when every
    cell is a number or empty and no quote or CR is in it, else row by row."""
    import numpy as np

    collector = ctx.collector
    ncol = len(header)
    if not dirty and text_cols:
        converted: dict[int, Any] = {}
        for i in text_cols:
            cells = block[i]
            try:
                vals = [math.nan if c is None else float(c) for c in cells]
            except ValueError:
                dirty = True
                break
            converted[i] = (
                np.asarray(vals, dtype=np.float64),
                np.fromiter((c is not None for c in cells), bool, rows),
            )
        else:
            for i, (vals, mask) in converted.items():
                block[i], masks[i] = vals, mask
    if dirty:
        add = collector.add
        cells_of = [
            block[i]
            if text_cols.get(i)
            else (
                block[i].tolist()
                if masks[i] is None
                else [v if m else None for v, m in zip(block[i].tolist(), masks[i].tolist(), strict=True)]
            )
            for i in range(ncol)
        ]
        for r in range(rows):
            step = None
            if step_col >= 0:
                step = to_float(cells_of[step_col][r])
            metrics: dict[str, float] = {}
            for i in range(ncol):
                if i == step_col:
                    continue
                cell = cells_of[i][r]
                if cell is None or cell == "":
                    continue
                fv = to_float(cell)
                if fv is not None:
                    metrics[header[i]] = fv
            if metrics:
                add(step, metrics, prefix)
        return
    if step_col >= 0:
        steps = block[step_col]
        positional = not np.isfinite(steps).all() or (
            masks[step_col] is not None and not masks[step_col].all()
        )
    else:
        positional = True
    if positional:
        steps = np.arange(collector.records + 1, collector.records + rows + 1, dtype=np.float64)
    for i, name in enumerate(header):
        if i == step_col:
            continue
        col, keep = block[i], masks[i]
        if keep is None or keep.all():
            collector.add_columns(prefix + name, name, steps, col, positional=positional)
        elif keep.any():
            collector.add_columns(prefix + name, name, steps[keep], col[keep], positional=positional)
    collector.records += rows
    if not positional and rows:
        collector.last_step = float(np.nanmax(steps))


# ---------------------------------------------------------------------------- trainer_state.json


def read_trainer_state(path: Path, ctx: ReadContext, size: int) -> None:
    if size > MAX_JSON_FILE:
        raise LogInputError(
            f"{path} is {size >> 20} MiB, too large for a trainer_state.json",
            "pass the console log or metrics file instead",
        )
    with _open(path) as f:
        raw = f.read()
    ctx.stats.bytes_read += len(raw)
    try:
        state = json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError) as exc:
        raise LogInputError(
            f"{path} is not valid JSON: {exc}", "check the file, or force format='jsonl'"
        ) from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise LogInputError(f"{path} has no log_history list", "pass a Hugging Face trainer_state.json")
    from trainsleuth.tools.logs.textparse import flatten

    for entry in history:
        if isinstance(entry, dict):
            metrics = flatten(entry)
            step = pick_step(metrics)
            if metrics:
                ctx.collector.add(step, metrics)


# ---------------------------------------------------------------------------- TensorBoard


def read_tensorboard(files: list[Path], ctx: ReadContext, root: Path) -> None:
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
        from tensorboard.util import tensor_util
    except ImportError:  # pragma: no cover - tensorboard is a declared dependency
        raise LogInputError(
            "reading TensorBoard event files needs the tensorboard package", "pip install tensorboard"
        ) from None
    add = ctx.collector.add
    multi_run = len({f.parent for f in files}) > 1
    for i, fpath in enumerate(sorted(files)):
        ctx.check_cancel()
        if ctx.progress:
            ctx.progress(i, len(files), f"reading {fpath.name}")
        run = fpath.parent.relative_to(root).as_posix() if multi_run and fpath.parent != root else ""
        prefix = f"{run}/" if run and run != "." else ""
        try:
            loader = EventFileLoader(str(fpath))
            events = loader.Load()
            for event in events:
                if not event.HasField("summary"):
                    continue
                for value in event.summary.value:
                    kind = value.WhichOneof("value")
                    v: float | None = None
                    if kind == "simple_value":
                        v = float(value.simple_value)
                    elif kind == "tensor":
                        try:
                            arr = tensor_util.make_ndarray(value.tensor)
                        except Exception:  # a malformed or non-numeric tensor: not a scalar
                            continue
                        if arr.size == 1 and arr.dtype.kind in "fiub":
                            v = float(arr.reshape(()))
                    if v is not None:
                        add(float(event.step), {value.tag: v}, prefix)
        except LogInputError:
            raise
        except Exception as exc:  # truncated or corrupt event file: keep what was read
            ctx.stats.notes.append(
                f"{fpath.name}: stopped reading at a corrupt record ({type(exc).__name__})"
            )
        try:
            ctx.stats.bytes_read += fpath.stat().st_size
        except OSError:
            pass


# ---------------------------------------------------------------------------- MLflow


def read_mlflow(run_dir: Path, ctx: ReadContext) -> None:
    """`metrics/<name>` files with `timestamp value step` lines (names may contain '/')."""
    metrics_dir = run_dir / "metrics" if (run_dir / "metrics").is_dir() else run_dir
    files = [p for p in sorted(metrics_dir.rglob("*")) if p.is_file()][:MAX_DIR_ENTRIES]
    for p in files:
        ctx.check_cancel()
        name = p.relative_to(metrics_dir).as_posix()
        try:
            size = p.stat().st_size
        except OSError:
            continue
        for line in iter_lines(p, ctx, size):
            parts = line.split()
            if len(parts) < 2:
                continue
            v = to_float(parts[1])
            if v is None:
                continue
            step = to_float(parts[2]) if len(parts) > 2 else None
            ctx.collector.add(step, {name: v})


# ---------------------------------------------------------------------------- folders


def _read_dir(path: Path, fmt: str, ctx: ReadContext) -> None:
    entries: list[Path] = []
    tfevents: list[Path] = []
    truncated = False
    try:
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            depth = Path(dirpath).relative_to(path).parts
            if len(depth) > 6:
                dirnames[:] = []
                continue
            for fn in filenames:
                p = Path(dirpath) / fn
                if "tfevents" in fn:
                    tfevents.append(p)
                else:
                    entries.append(p)
                if len(entries) + len(tfevents) >= MAX_DIR_ENTRIES:
                    truncated = True
                    break
            if truncated:
                break
    except OSError as exc:
        raise LogInputError(f"{path}: cannot list the folder ({exc})", "check its permissions") from None
    if fmt in ("tensorboard", "auto") and tfevents:
        ctx.stats.format = "tensorboard"
        ctx.stats.files.extend(str(p) for p in tfevents[:20])
        read_tensorboard(tfevents, ctx, path)
        return
    if fmt == "tensorboard":
        raise LogInputError(
            f"{path} holds no TensorBoard event files (*tfevents*)", "pass the log dir of the run"
        )
    if fmt in ("mlflow", "auto") and (path / "metrics").is_dir():
        ctx.stats.format = "mlflow"
        ctx.stats.files.append(str(path / "metrics"))
        read_mlflow(path, ctx)
        return
    if fmt == "mlflow":
        raise LogInputError(f"{path} is not an MLflow run folder (no metrics/ inside)", "pass the run folder")
    states = [p for p in entries if p.name == "trainer_state.json"]
    if states and fmt in ("auto", "trainer_state"):
        best = max(states, key=lambda p: p.stat().st_mtime)
        ctx.stats.format = "trainer_state"
        ctx.stats.files.append(str(best))
        ctx.stats.notes.append(f"read the newest trainer_state.json of {len(states)} in the folder")
        read_trainer_state(best, ctx, best.stat().st_size)
        return
    logs = [p for p in entries if p.suffix.lower() in TEXT_SUFFIXES and p.is_file()]
    if truncated or len(logs) > MAX_LOG_FILES:
        shown = ", ".join(p.relative_to(path).as_posix() for p in logs[:5])
        raise LogInputError(
            f"{path} holds {'more than ' if truncated else ''}{len(logs) if not truncated else MAX_DIR_ENTRIES} "
            f"files ({shown}, ...), too many to treat as one run; it is not a TensorBoard log dir or an "
            "MLflow run folder",
            "pass one log file, a TensorBoard log dir (with *tfevents* files) or an MLflow run folder",
        )
    if not logs:
        raise LogInputError(
            f"{path} holds no log files (no .log/.txt/.out/.jsonl/.csv/.json, TensorBoard events or MLflow metrics)",
            "pass a log file or a run folder",
        )
    ctx.stats.format = "folder"
    for p in sorted(logs):
        prefix = f"{p.relative_to(path).as_posix()}:" if len(logs) > 1 else ""
        sub = ReadContext(ctx.collector, ctx.errors, ReadStats(), ctx.progress, ctx.cancel)
        try:
            size = p.stat().st_size
            head = _sniff(p) if size else b""
            if not size or looks_binary(head):
                continue
            if _is_csv(p.name.lower(), head):
                read_csv(p, sub, size, prefix)
            elif _is_trainer_state(p.name.lower(), head):
                read_trainer_state(p, sub, size)
            else:
                read_text(p, fmt if fmt != "auto" else "auto", sub, size, prefix)
        except LogInputError as exc:
            ctx.stats.notes.append(exc.message)
            continue
        ctx.stats.files.append(str(p))
        ctx.stats.bytes_read += sub.stats.bytes_read
        ctx.stats.lines += sub.stats.lines
        ctx.stats.long_lines_skipped += sub.stats.long_lines_skipped
        ctx.stats.undecodable_lines += sub.stats.undecodable_lines

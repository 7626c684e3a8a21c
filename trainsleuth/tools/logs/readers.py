"""Find what a path holds and stream it into a Collector: text logs line by line, CSV/TSV,
HF `trainer_state.json`, TensorBoard event files (with tensorboard's own reader), MLflow run
folders. Memory stays bounded by the kept points: files are read line by line with a cap on
line length, never loaded whole (except `trainer_state.json`, which is size-checked first)."""

from __future__ import annotations

import io
import json
import os
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from trainsleuth.tools.logs.collect import Collector
from trainsleuth.tools.logs.errors import ErrorScanner, has_trigger
from trainsleuth.tools.logs.fastpath import BlockSink, LineParser, TemplateEngine
from trainsleuth.tools.logs.series import DEFAULT_CAPACITY
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
    reader: str = ""  # CSV files: "pyarrow" when pyarrow converted some blocks, else "python"
    arrow_blocks: int = 0  # CSV blocks pyarrow converted


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


def collect(path: Path, fmt: str = "auto", *, capacity: int = DEFAULT_CAPACITY, progress: Progress | None = None,
            cancel: threading.Event | None = None) -> tuple[Collector, ErrorScanner, ReadStats]:  # fmt: skip
    """Read `path` (file or run folder) into bounded series and error lines, without analysis."""
    collector = Collector(capacity)
    errors = ErrorScanner()
    stats = ReadStats()
    read_path(Path(path), fmt, ReadContext(collector, errors, stats, progress, cancel))
    collector.finish()
    return collector, errors, stats


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
        from trainsleuth.tools.logs.csvread import read_csv

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
    """Decoded blocks of whole lines (see `iter_raw_blocks`)."""
    for raw in iter_raw_blocks(path, ctx, size):
        yield _decode(raw, ctx.stats)


def read_sizes() -> Iterator[int]:
    """Sizes of a log's successive reads, whose last newlines end its blocks: small first blocks
    (line templates are learnt early), then BLOCK bytes."""
    size = 1 << 16
    while True:
        yield size
        size = min(BLOCK, size * 4)


def iter_raw_blocks(path: Path, ctx: ReadContext, size: int) -> Iterator[bytearray]:
    """Blocks of whole lines as bytes (about BLOCK bytes each, each ending in a newline). A line
    longer than MAX_LINE is never held whole: once a stretch without a newline passes MAX_LINE it
    is dropped and counted. Lines are counted by whoever decodes the block (`_decode`). Each block
    is read straight into its own buffer, after the previous block's unfinished line (no copy)."""
    stats = ctx.stats
    carry = b""  # the unfinished last line of the previous read (never holds a newline)
    skipping = False
    next_report = 1 << 26
    sizes = read_sizes()
    with _open(path) as f:
        while True:
            buf = bytearray(len(carry) + next(sizes))
            buf[: len(carry)] = carry
            try:
                with memoryview(buf) as view:
                    got = f.readinto(view[len(carry) :])
            except OSError as exc:
                raise LogInputError(
                    f"{path}: read failed ({exc.strerror or exc})", "check the file"
                ) from None
            if not got:
                break
            del buf[len(carry) + got :]
            stats.bytes_read += got
            if stats.bytes_read >= next_report:
                next_report += 1 << 26
                ctx.check_cancel()
                if ctx.progress:
                    ctx.progress(stats.bytes_read, size, "reading log")
            if skipping:  # the carry is empty while an overlong line is skipped
                nl = buf.find(b"\n")
                if nl < 0:
                    continue
                del buf[: nl + 1]
                skipping = False
            nl = buf.rfind(b"\n")
            if nl < 0:
                carry = bytes(buf)
                if len(carry) > MAX_LINE:
                    stats.long_lines_skipped += 1
                    skipping, carry = True, b""
                continue
            carry = bytes(buf[nl + 1 :])
            del buf[nl + 1 :]
            if len(carry) > MAX_LINE:
                stats.long_lines_skipped += 1
                skipping, carry = True, b""
            yield buf
        if carry and not skipping:
            yield bytearray(carry + b"\n")


def _decode(data: bytes | bytearray, stats: ReadStats) -> str:
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
    except ImportError:
        from trainsleuth.tools.extras import install_hint

        raise LogInputError(
            "reading TensorBoard event files needs the optional extra [tensorboard]",
            install_hint("tensorboard"),
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
                from trainsleuth.tools.logs.csvread import read_csv

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

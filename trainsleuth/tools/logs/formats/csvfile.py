"""CSV/TSV metric files: Lightning and Keras CSVLogger, TensorBoard and W&B CSV exports.

The file is read in the blocks of whole lines every text log is read in (`iter_raw_blocks`), so
memory stays bounded by a few blocks plus the kept points. A block of plain cells (no quote, no
carriage return, no blank line, the header's number of fields in every row, every cell a number or
empty) is converted in bulk and fed to the series column by column; any other block is read row by
row with the `csv` module.

For large files two worker threads each read a block (`spans.py`: `os.pread` at the same block
boundaries) and convert it with pyarrow's CSV reader (C++, without the GIL), ahead of the thread
feeding the series. A block pyarrow refuses is converted in Python instead. Both conversions round
correctly, so they give the same bits, and the blocks are the same either way: the result never
depends on which one ran (`tests/test_logs_csv_fast.py` checks this)."""

from __future__ import annotations

import csv
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from trainsleuth.tools.logs.collect import POSITION
from trainsleuth.tools.logs.series import all_finite
from trainsleuth.tools.logs.source import ReadContext, ReadStats, decode, iter_raw_blocks
from trainsleuth.tools.logs.spans import Span, file_spans
from trainsleuth.tools.logs.textparse import to_float

ARROW_MIN_BYTES = 2 << 20  # smaller CSVs are converted in Python (importing pyarrow costs more)
# Blocks converted ahead of the one being fed, each by its own worker thread: pyarrow converts a
# block single-threaded (cheaper in CPU than splitting it) and the blocks run side by side. More
# would use more cores where there are some, at about 25 MB of memory per block in flight.
_AHEAD = 2

Raw = bytes | bytearray | Span  # a block: read already, or a span of the file to read
Loaded = tuple[bytes | bytearray, list[Any] | None]  # a block's bytes, and pyarrow's columns


def _as_bytes(raw: Raw) -> bytes | bytearray:
    return raw.read() if isinstance(raw, Span) else raw


_EMPTY = "-9.87654321e-307"  # stands in for an empty cell during bulk conversion
_EMPTY_VALUE = float(_EMPTY)


def read_csv(path: Path, ctx: ReadContext, size: int, prefix: str = "", *, arrow: bool | None = None) -> None:
    """Read a CSV/TSV into `ctx.collector`. `arrow`: convert plain blocks with pyarrow (None: when
    the file is at least ARROW_MIN_BYTES and pyarrow is installed)."""
    stats = ctx.stats
    stats.reader = "python"
    use_arrow = size >= ARROW_MIN_BYTES if arrow is None else arrow
    modules = _pyarrow() if use_arrow else None
    if use_arrow and modules is None and arrow is None:
        from trainsleuth.tools.extras import install_hint

        stats.notes.append(
            f"read in Python; the optional extra [fast-csv] reads large CSVs faster: {install_hint('fast-csv')}"
        )
    if use_arrow and modules is None and arrow is None:
        from trainsleuth.tools.extras import install_hint

        stats.notes.append(
            f"read in Python; the optional extra [fast-csv] reads large CSVs faster: {install_hint('fast-csv')}"
        )
    header: list[str] = []
    delim = ","
    step_col = -1
    converter: _ArrowBlocks | None = None
    pending: deque[tuple[Raw, Future[Loaded] | None]] = deque()
    spans = file_spans(path, ctx, size) if modules is not None else None
    blocks: Iterator[Raw] = spans.spans() if spans is not None else iter_raw_blocks(path, ctx, size)
    pool_cm = ThreadPoolExecutor(_AHEAD, thread_name_prefix="trainsleuth-csv") if modules else nullcontext()
    try:
        with pool_cm as pool:
            for raw in blocks:
                if not header:
                    found = _take_header(_as_bytes(raw), stats)
                    if found is None:
                        continue
                    header, delim, raw = found
                    step_col = _step_column(header, ctx.step_key)
                    if modules is not None and len(header) > 1:
                        converter = _ArrowBlocks(modules, len(header), delim)
                    if not raw:
                        continue
                job = None
                if converter is not None and pool is not None:
                    job = pool.submit(converter.load, raw)
                pending.append((raw, job))
                if len(pending) > _AHEAD:
                    _finish(*pending.popleft(), header, delim, step_col, ctx, prefix)
            while pending:
                _finish(*pending.popleft(), header, delim, step_col, ctx, prefix)
    finally:
        if spans is not None:
            spans.close()


def _pyarrow() -> tuple[Any, Any] | None:
    try:
        import pyarrow as pa
        import pyarrow.csv as pacsv
    except ImportError:
        return None
    return pa, pacsv


def _take_header(raw: bytes | bytearray, stats: ReadStats) -> tuple[list[str], str, bytes | bytearray] | None:
    """The header (the first line that is neither blank nor a `#` comment), its delimiter and the
    rest of the block; None, with the block's lines counted, when the block has no header."""
    pos = 0
    while pos < len(raw):
        end = raw.find(b"\n", pos)
        end = len(raw) if end < 0 else end
        line = raw[pos:end].decode("utf-8", "replace")
        pos = end + 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        decode(raw[:pos], stats)  # count the lines up to the header
        delim = "\t" if line.count("\t") > line.count(",") else ","
        try:
            header = [h.strip() for h in next(csv.reader([line.rstrip("\r")], delimiter=delim), [])]
        except csv.Error:
            header = [h.strip() for h in line.strip().split(delim)]
        if not header:  # pragma: no cover - a non-blank line always gives a field
            header = [line.strip()]
        return header, delim, raw[pos:]
    decode(raw, stats)
    return None


def _step_column(header: list[str], user: str | None = None) -> int:
    if user is not None:
        return header.index(user) if user in header else -1
    lowered = [h.lower() for h in header]
    for key in ("step", "global_step", "trainer/global_step", "iteration", "iter", "_step",
                "time/total_timesteps", "total_timesteps", "epoch"):  # fmt: skip
        if key in lowered:
            return lowered.index(key)
    if len(lowered) >= 2 and lowered[:2] == ["wall time", "step"]:
        return 1
    return -1


def _finish(raw: Raw, job: Future[Loaded] | None, names: list[str], delim: str, step_col: int, ctx: ReadContext,
            prefix: str) -> None:  # fmt: skip
    """Feed one block, in file order: pyarrow's columns when it converted the block, else the
    block's text through the Python conversion."""
    data, columns = job.result() if job is not None else (_as_bytes(raw), None)
    if columns is None:
        _csv_block(decode(data, ctx.stats), names, delim, step_col, ctx, prefix)
        return
    rows = len(columns[0])
    ctx.stats.lines += rows  # a converted block is plain ASCII, one row per line
    ctx.stats.reader = "pyarrow"
    ctx.stats.arrow_blocks += 1
    _feed_columns(columns, rows, names, step_col, ctx, prefix)


def _csv_block(text: str, names: list[str], delim: str, step_col: int, ctx: ReadContext, prefix: str) -> None:
    """One block in Python: in bulk when every cell is a number or empty, else row by row."""
    columns = _bulk_columns(text, len(names), delim)
    if columns is not None:
        _feed_columns(columns, len(columns[0]), names, step_col, ctx, prefix)
        return
    add = ctx.collector.add
    ncol = len(names)
    source = names[step_col] if 0 <= step_col < len(names) else ""
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
            add(step, metrics, prefix, source)


def _bulk_columns(text: str, ncol: int, delim: str) -> list[Any] | None:
    """The block's columns as contiguous float arrays (_EMPTY_VALUE for an empty cell), or None
    when it has to be read row by row (quotes, CRs, ragged rows, a cell `float` cannot read)."""
    import numpy as np

    rows = text.count("\n")
    if not rows or '"' in text or "\r" in text or ncol < 2:
        return None
    body = text
    empty = delim + delim
    if empty in body or ("\n" + delim) in body or (delim + "\n") in body or body.startswith(delim):
        body = "\n" + body
        while empty in body:
            body = body.replace(empty, delim + _EMPTY + delim)
        body = body.replace("\n" + delim, "\n" + _EMPTY + delim).replace(delim + "\n", delim + _EMPTY + "\n")[
            1:
        ]
    tokens = body.replace("\n", delim).split(delim)
    if tokens and tokens[-1] == "":
        tokens.pop()
    if len(tokens) != rows * ncol:
        return None
    try:
        table = np.fromiter(map(float, tokens), np.float64, len(tokens)).reshape(rows, ncol)
    except ValueError:
        return None
    return [np.ascontiguousarray(table[:, i]) for i in range(ncol)]


def _feed_columns(columns: list[Any], rows: int, names: list[str], step_col: int, ctx: ReadContext,
                  prefix: str) -> None:  # fmt: skip
    """Give one block's columns to the series. A block whose step column has an empty or
    non-finite cell takes its steps from row positions; empty cells are not values."""
    import numpy as np

    collector = ctx.collector
    positional = True
    if step_col >= 0:
        steps = columns[step_col]
        positional = not all_finite(steps) or _EMPTY_VALUE in steps
    if positional:
        steps = np.arange(collector.records + 1, collector.records + rows + 1, dtype=np.float64)
        collector.step_sources[POSITION] += rows
    else:
        collector.step_sources[names[step_col]] += rows
    for i, name in enumerate(names):
        if i == step_col:
            continue
        col = columns[i]
        if _EMPTY_VALUE not in col:
            collector.add_columns(prefix + name, name, steps, col, positional=positional)
            continue
        keep = col != _EMPTY_VALUE  # empty cells (Lightning's sparse columns) are not values
        if keep.any():
            collector.add_columns(prefix + name, name, steps[keep], col[keep], positional=positional)
    collector.records += rows
    if not positional and rows:
        collector.last_step = float(np.nanmax(steps))


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


class _ArrowBlocks:
    """Bulk conversion of a block by pyarrow, with the Python conversion's meaning: the block is
    taken only when the Python conversion would read it in bulk too, and gives the same floats."""

    def __init__(self, modules: tuple[Any, Any], ncol: int, delim: str) -> None:
        self.pa, self.pacsv = modules
        pacsv = self.pacsv
        names = [f"c{i}" for i in range(ncol)]
        self.read_options = pacsv.ReadOptions(column_names=names, block_size=1 << 20, use_threads=False)
        # no quoting (a block with a quote is not taken), and a blank line is a row, not skipped
        self.parse_options = pacsv.ParseOptions(
            delimiter=delim, quote_char=False, double_quote=False, escape_char=False,
            newlines_in_values=False, ignore_empty_lines=False,
        )  # fmt: skip
        self.convert_options = pacsv.ConvertOptions(
            column_types=dict.fromkeys(names, self.pa.float64()),
            null_values=[""],  # only an empty cell is missing: "nan", "NA", "null" are not
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        )

    @staticmethod
    def accepts(raw: bytes | bytearray) -> bool:
        """Blocks the Python conversion reads row by row, or would read differently, are not
        taken: quotes and CRs (row by row there) and `(` (pyarrow reads `nan(123)`, `float` does
        not). Blank lines are caught after conversion (`convert`)."""
        return not (b'"' in raw or b"\r" in raw or b"(" in raw)

    def load(self, raw: Raw) -> Loaded:
        """Read the block (in the worker thread) and convert it."""
        data = _as_bytes(raw)
        return data, self.convert(data)

    def convert(self, raw: bytes | bytearray) -> list[Any] | None:
        """The block's columns as contiguous float arrays (_EMPTY_VALUE for an empty cell), or None
        when pyarrow cannot read every cell as a number (ragged rows, text, odd spellings)."""
        if not self.accepts(raw):
            return None
        pa = self.pa
        try:
            table = self.pacsv.read_csv(
                pa.py_buffer(raw),
                read_options=self.read_options,
                parse_options=self.parse_options,
                convert_options=self.convert_options,
            )
        except pa.ArrowInvalid:
            return None
        if not table.num_rows:
            return None
        arrays = [_float_column(col) for col in table.columns]
        missing = [empty for _, empty in arrays]
        if all(m is not None for m in missing):
            import numpy as np

            # pyarrow makes a blank line a row of empty cells; Python reads such a block row by row
            if np.logical_and.reduce(missing).any():
                return None
        return [values for values, _ in arrays]


def _float_column(col: Any) -> tuple[Any, Any]:
    """A float64 column as a numpy array with _EMPTY_VALUE where a cell is empty, and the mask of
    empty cells (None when there is none). Read from the buffers directly: pyarrow's own
    `to_numpy` and `fill_null` import pandas, which costs more than the whole conversion."""
    import numpy as np

    arr = col.combine_chunks()
    n = len(arr)
    validity, data = arr.buffers()[:2]
    values = np.frombuffer(data, dtype=np.float64, count=n, offset=arr.offset * 8)
    if not arr.null_count:
        return values, None
    bits = np.unpackbits(np.frombuffer(validity, np.uint8), count=arr.offset + n, bitorder="little")
    empty = bits[arr.offset :] == 0
    return np.where(empty, _EMPTY_VALUE, values), empty

"""A file's blocks of whole lines as byte ranges, read where they are used (pyarrow CSV path).

`iter_raw_blocks` reads block after block in one thread and copies each twice (into a zeroed
buffer, then the kernel's copy). Here the block boundaries are found first, from a few bytes read
before each boundary, and every worker then reads its own block with one `os.pread`, in parallel.
The ranges are exactly the blocks `iter_raw_blocks` yields: every read (`read_sizes`) ends a block
at its last newline. A file where some read holds no newline, or leaves an unfinished line longer
than MAX_LINE (which `iter_raw_blocks` skips), is read the usual way.

No memory map: a log rewritten while it is read (Lightning rewrites metrics.csv at every save)
would truncate the mapped pages and kill the process with SIGBUS; a short `pread` is an error
message instead."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from trainsleuth.tools.logs.source import MAX_LINE, LogFile, LogInputError, ReadContext, read_sizes

_REPORT_EVERY = 1 << 26
_PEEK = 4096  # bytes read before a boundary to find its newline (more only for long lines)


class Span:
    """One block: bytes [start, end) of the file; `newline`: the file's last line has no newline
    and the block gets one (as `iter_raw_blocks` adds it)."""

    __slots__ = ("end", "fd", "newline", "path", "start")

    def __init__(self, path: Path, fd: int, start: int, end: int, newline: bool) -> None:
        self.path, self.fd, self.start, self.end, self.newline = path, fd, start, end, newline

    def __len__(self) -> int:
        return self.end - self.start

    def read(self) -> bytes:
        try:
            data = os.pread(self.fd, self.end - self.start, self.start)
        except OSError as exc:
            raise LogInputError(
                f"{self.path}: read failed ({exc.strerror or exc})", "check the file"
            ) from None
        if len(data) != self.end - self.start:
            raise LogInputError(
                f"{self.path} became shorter while it was read (rewritten or truncated by its writer)",
                "analyse it again, or copy it first while the run is still writing it",
            )
        return data + b"\n" if self.newline else data


class FileSpans:
    """An open file and its blocks. Close it once every span has been read."""

    def __init__(self, path: Path, fd: int, bounds: list[tuple[int, int]], ctx: ReadContext, size: int,
                 last_newline: bool) -> None:  # fmt: skip
        self.path, self.fd, self.bounds, self.ctx, self.size = path, fd, bounds, ctx, size
        self.last_newline = last_newline

    def spans(self) -> Iterator[Span]:
        stats = self.ctx.stats
        next_report = _REPORT_EVERY
        for start, end in self.bounds:
            self.ctx.check_cancel()
            stats.bytes_read += end - start
            if stats.bytes_read >= next_report and self.ctx.progress:
                next_report += _REPORT_EVERY
                self.ctx.progress(stats.bytes_read, self.size, "reading log")
            yield Span(self.path, self.fd, start, end, end == self.size and not self.last_newline)

    def close(self) -> None:
        os.close(self.fd)


def _last_newline(fd: int, lo: int, hi: int) -> int:
    """Offset of the last newline in [lo, hi), or -1."""
    peek_lo = max(lo, hi - _PEEK)
    k = os.pread(fd, hi - peek_lo, peek_lo).rfind(b"\n")
    if k >= 0:
        return peek_lo + k
    if peek_lo == lo:
        return -1
    k = os.pread(fd, peek_lo - lo, lo).rfind(b"\n")
    return lo + k if k >= 0 else -1


def block_bounds(fd: int, size: int) -> list[tuple[int, int]] | None:
    """The (start, end) of each block `iter_raw_blocks` would yield for a file of `size` bytes,
    or None for a file it would read differently (a read without a newline, or an unfinished
    line over MAX_LINE at the end of a read)."""
    bounds: list[tuple[int, int]] = []
    start = pos = 0
    for read_size in read_sizes():
        if pos >= size:
            break
        end = min(size, pos + read_size)
        nl = _last_newline(fd, max(pos, end - MAX_LINE - 1), end)
        if nl < 0:
            return None
        bounds.append((start, nl + 1))
        start, pos = nl + 1, end
    if start < size:
        bounds.append((start, size))
    return bounds


def file_spans(path: Path, ctx: ReadContext, size: int) -> FileSpans | None:
    """The file's blocks as ranges to read with `pread`, or None where `pread` is missing or the
    file would be read differently from `iter_raw_blocks` (see the module docstring)."""
    if not size or not hasattr(os, "pread"):
        return None
    f = LogFile(path)
    if f.gzip:  # a compressed log is read as a stream
        f.close()
        return None
    fd = os.dup(f.fd)
    f.close()
    try:
        bounds = block_bounds(fd, size)
        last_newline = os.pread(fd, 1, size - 1) == b"\n"
    except OSError:
        bounds = None
    if bounds is None:
        os.close(fd)
        return None
    return FileSpans(path, fd, bounds, ctx, size, last_newline)

"""The bottom layer of log reading: safe, bounded access to one file.

Every reader goes through `LogFile`: it opens only regular files (a FIFO, socket or device is
refused without blocking: the file is opened non-blocking and checked with `fstat` on the open
descriptor), never reads past the size the file had when it was opened (a log still being written,
or a file swapped for something endless, cannot make a read unbounded), and decompresses gzip
logs (`.gz` or the gzip magic bytes) as a stream, with a ceiling on the bytes it yields.

Also here: the read context shared by every format reader (`ReadContext`), the error type
(`LogInputError`), and the iteration of a file as blocks of whole lines. Nothing here imports a
format reader, so format readers, `spans` and `readers` can all import this module without a circle.
"""

from __future__ import annotations

import gzip
import os
import stat
import threading
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from trainsleuth.tools.logs.collect import Collector
    from trainsleuth.tools.logs.errors import ErrorScanner

MAX_LINE = 1 << 20  # longer lines are skipped (counted), never held whole
BLOCK = 8 << 20  # text logs are read in blocks of whole lines
MAX_JSON_FILE = 256 << 20
GZIP_MAX_RATIO = 1000  # a gzip log yields at most this many times its size (plus GZIP_SLACK)
GZIP_SLACK = 64 << 20
GZIP_MAGIC = b"\x1f\x8b"


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
    skipped: Counter[str] = field(default_factory=Counter)  # lines that are not metric records, by why
    skipped_example: dict[str, str] = field(default_factory=dict)  # why -> the first such line

    def skip(self, why: str, example: str = "", count: int = 1) -> None:
        self.skipped[why] += count
        if example and why not in self.skipped_example:
            self.skipped_example[why] = example.strip()[:120]

    def note(self, text: str) -> None:
        if text not in self.notes and len(self.notes) < 50:
            self.notes.append(text)


Progress = Callable[[int, int, str], None]


@dataclass
class ReadContext:
    collector: Collector
    errors: ErrorScanner
    stats: ReadStats
    progress: Progress | None = None
    cancel: threading.Event | None = None
    roots: list[Path] | None = None  # symlinks in run folders may lead only here (None: anywhere)
    step_key: str | None = None  # the user's step key (`--role step=KEY`), None: found per format

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise LogInputError("the analysis was cancelled")


def _oserror(path: Path, exc: OSError, what: str) -> LogInputError:
    if isinstance(exc, PermissionError):
        return LogInputError(
            f"{path}: permission denied ({exc.strerror})",
            "make the file readable by the user running trainsleuth",
        )
    if isinstance(exc, IsADirectoryError):
        return LogInputError(f"{path} is a directory", "pass the folder itself or a file inside it")
    return LogInputError(f"{path}: {what} ({exc.strerror or exc})", "check the path")


def kind_of(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


class LogFile:
    """One regular file opened for reading, bounded to the size it had when opened.

    `readinto`/`read` give the file's bytes (decompressed for a gzip log) and stop at the bound;
    `size` is the size on disk (progress is reported against it), `gzip` says whether the bytes
    are decompressed, and `truncated` whether reading stopped at the bound with more to come."""

    def __init__(self, path: Path) -> None:
        self.path = path
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags)
        except OSError as exc:
            raise _oserror(path, exc, "cannot be opened") from None
        try:
            st = os.fstat(fd)
        except OSError as exc:  # pragma: no cover - fstat on an open descriptor does not fail
            os.close(fd)
            raise _oserror(path, exc, "cannot be read") from None
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise LogInputError(
                f"{path} is {kind_of(st.st_mode)}, not a regular file; it cannot be analysed as a log",
                "save the log to a regular file and pass that file",
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        self.fd = fd
        self.raw = os.fdopen(fd, "rb", buffering=0)
        self.size = st.st_size
        self.gzip = False
        self.truncated = False
        self._left = st.st_size
        self._gz: gzip.GzipFile | None = None
        try:
            magic = os.pread(fd, 2, 0) if hasattr(os, "pread") else b""
        except OSError:
            magic = b""
        if magic == GZIP_MAGIC or (path.name.lower().endswith(".gz") and not magic):
            self.gzip = True
            self._gz = gzip.GzipFile(fileobj=cast(Any, _Bounded(self.raw, st.st_size)), mode="rb")
            self._left = min(st.st_size * GZIP_MAX_RATIO + GZIP_SLACK, 1 << 36)

    def readinto(self, view: memoryview) -> int:
        if self._left <= 0:
            if not self.truncated and self._peek_more():
                self.truncated = True
            return 0
        want = min(len(view), self._left)
        try:
            if self._gz is not None:
                got = self._gz.readinto(view[:want])
            else:
                got = self.raw.readinto(view[:want]) or 0
        except (OSError, EOFError, zlib.error) as exc:
            if self._gz is not None:
                raise LogInputError(
                    f"{self.path}: the gzip stream is corrupt or truncated ({exc})",
                    "check the file, or decompress it and pass the plain log",
                ) from None
            raise _oserror(self.path, exc, "read failed") from None  # type: ignore[arg-type]
        self._left -= got
        return got

    def _peek_more(self) -> bool:
        try:
            if self._gz is not None:
                return bool(self._gz.read(1))
            return bool(self.raw.read(1))
        except (OSError, EOFError, zlib.error):
            return False

    def read(self, n: int = -1) -> bytes:
        """Up to `n` bytes (all that is left within the bound when n < 0)."""
        want = self._left if n < 0 else min(n, self._left)
        if want <= 0:
            self.readinto(memoryview(bytearray(1)))  # notes whether the file went on past the bound
            return b""
        buf = bytearray(want)
        got = 0
        with memoryview(buf) as view:
            while got < want:
                k = self.readinto(view[got:])
                if not k:
                    break
                got += k
        del buf[got:]
        return bytes(buf)

    def close(self) -> None:
        if self._gz is not None:
            self._gz.close()
        self.raw.close()

    def __enter__(self) -> LogFile:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _Bounded:
    """A raw file seen only up to `limit` bytes (the gzip reader's input)."""

    def __init__(self, raw: object, limit: int) -> None:
        self._raw = raw
        self._left = limit

    def read(self, n: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        n = self._left if n < 0 else min(n, self._left)
        data: bytes = self._raw.read(n) or b""  # type: ignore[attr-defined]
        self._left -= len(data)
        return data

    def readable(self) -> bool:
        return True


def open_log(path: Path) -> LogFile:
    return LogFile(path)


def sniff(path: Path) -> bytes:
    """The first 64 KiB of the file (decompressed for a gzip log)."""
    with LogFile(path) as f:
        return f.read(65536)


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


# ---------------------------------------------------------------------------- lines and blocks


def iter_lines(path: Path, ctx: ReadContext, size: int) -> Iterator[str]:
    """Decoded lines, each at most MAX_LINE bytes; longer lines are skipped and counted."""
    for block in iter_blocks(path, ctx, size):
        yield from block.split("\n")[:-1]


def iter_blocks(path: Path, ctx: ReadContext, size: int) -> Iterator[str]:
    """Decoded blocks of whole lines (see `iter_raw_blocks`)."""
    for raw in iter_raw_blocks(path, ctx, size):
        yield decode(raw, ctx.stats)


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
    is dropped and counted. Lines are counted by whoever decodes the block (`decode`). Each block
    is read straight into its own buffer, after the previous block's unfinished line (no copy)."""
    stats = ctx.stats
    carry = b""  # the unfinished last line of the previous read (never holds a newline)
    skipping = False
    next_report = 1 << 26
    sizes = read_sizes()
    with LogFile(path) as f:
        while True:
            buf = bytearray(len(carry) + next(sizes))
            buf[: len(carry)] = carry
            with memoryview(buf) as view:
                got = f.readinto(view[len(carry) :])
            if not got:
                break
            del buf[len(carry) + got :]
            stats.bytes_read += got
            if stats.bytes_read >= next_report:
                next_report += 1 << 26
                ctx.check_cancel()
                if ctx.progress:
                    ctx.progress(
                        min(stats.bytes_read, size) if not f.gzip else f.raw.tell(), size, "reading log"
                    )
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
        if f.truncated:
            stats.note(
                f"{path.name}: "
                + (
                    "the decompressed log passed the size limit; only its beginning was read"
                    if f.gzip
                    else "the file grew while it was read; only the bytes it had when opened were read"
                )
            )


def decode(data: bytes | bytearray, stats: ReadStats) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", "replace")
        stats.undecodable_lines += sum(1 for ln in text.split("\n") if "\ufffd" in ln)
    stats.lines += text.count("\n")
    return text

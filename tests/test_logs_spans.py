"""Block ranges read with pread are exactly the blocks `iter_raw_blocks` yields; files it reads
differently are left to it; a file that shrinks while it is read is an error, not a crash."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from trainsleuth.tools.logs import LogInputError, collect
from trainsleuth.tools.logs.collect import Collector
from trainsleuth.tools.logs.errors import ErrorScanner
from trainsleuth.tools.logs.formats.csvfile import read_csv
from trainsleuth.tools.logs.source import MAX_LINE, ReadContext, ReadStats, iter_raw_blocks
from trainsleuth.tools.logs.spans import file_spans


def _ctx() -> ReadContext:
    return ReadContext(Collector(), ErrorScanner(), ReadStats())


def _blocks_both_ways(path: Path) -> tuple[list[bytes], list[bytes] | None]:
    size = path.stat().st_size
    plain = [bytes(b) for b in iter_raw_blocks(path, _ctx(), size)]
    spans = file_spans(path, _ctx(), size)
    if spans is None:
        return plain, None
    try:
        return plain, [s.read() for s in spans.spans()]
    finally:
        spans.close()


def _lines(rng: random.Random, n: int, width: tuple[int, int]) -> bytes:
    return b"".join(b"x" * rng.randint(*width) + b"\n" for _ in range(n))


@pytest.mark.parametrize("seed", range(4))
def test_ranges_are_the_blocks_of_iter_raw_blocks(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    p = tmp_path / "f.csv"
    # short lines, a few 100 KB lines across read boundaries, and sometimes no final newline
    body = _lines(rng, 40_000, (5, 80)) + _lines(rng, 6, (90_000, 110_000)) + _lines(rng, 30_000, (5, 80))
    if seed % 2:
        body += b"last,line,without,newline"
    p.write_bytes(body)
    plain, spans = _blocks_both_ways(p)
    assert spans is not None and spans == plain
    assert len(plain) >= 4 and b"".join(plain).rstrip(b"\n") == body.rstrip(b"\n")


def test_files_read_differently_are_left_to_iter_raw_blocks(tmp_path: Path) -> None:
    long_line = tmp_path / "long.csv"  # reads without a newline, then an unfinished line over MAX_LINE
    long_line.write_bytes(b"a,b\n" + b"1" * (3 * MAX_LINE) + b",2\n3,4\n")
    plain, spans = _blocks_both_ways(long_line)
    assert spans is None and collect_stats(long_line).long_lines_skipped == 1
    assert b"".join(plain) == b"a,b\n3,4\n"  # the overlong line is skipped, never held
    tail = tmp_path / "tail.csv"  # the 4 MiB read has newlines, then an unfinished line over MAX_LINE
    tail.write_bytes(b"a,b\n" + b"1,2\n" * 350_000 + b"1" * (5 * MAX_LINE) + b"\n3,4\n")
    plain, spans = _blocks_both_ways(tail)
    assert spans is None and collect_stats(tail).long_lines_skipped == 1
    one_line = tmp_path / "one.csv"  # the first 64 KiB read holds no newline at all
    one_line.write_bytes(b"x" * 70_000 + b"\n1,2\n")
    assert _blocks_both_ways(one_line)[1] is None
    assert file_spans(tmp_path / "empty.csv", _ctx(), 0) is None


def collect_stats(path: Path) -> ReadStats:
    return collect(path)[2]


def test_a_file_shrinking_while_read_is_a_clear_error(tmp_path: Path) -> None:
    p = tmp_path / "metrics.csv"
    p.write_text("step,loss\n" + "".join(f"{i},{1 / (i + 1):.6f}\n" for i in range(400_000)))
    size = p.stat().st_size
    spans = file_spans(p, _ctx(), size)
    assert spans is not None
    try:
        first, *rest = list(spans.spans())
        first.read()
        with open(p, "r+b") as f:  # what Lightning's CSVLogger does at every save
            f.truncate(1000)
        with pytest.raises(LogInputError, match="became shorter while it was read"):
            rest[-1].read()
    finally:
        spans.close()


def test_reading_a_large_csv_can_be_cancelled(tmp_path: Path) -> None:
    p = tmp_path / "metrics.csv"
    p.write_text("step,loss\n" + "".join(f"{i},{1 / (i + 1):.6f}\n" for i in range(200_000)))
    cancel = threading.Event()
    cancel.set()
    ctx = ReadContext(Collector(), ErrorScanner(), ReadStats(), None, cancel)
    with pytest.raises(LogInputError, match="cancelled"):
        read_csv(p, ctx, p.stat().st_size, arrow=True)
    assert threading.active_count() < 10  # the conversion workers are gone
    assert not [t for t in threading.enumerate() if t.name.startswith("trainsleuth-csv")]

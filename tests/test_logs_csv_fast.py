"""pyarrow's bulk conversion of CSV blocks gives exactly what the Python conversion gives, is
taken where it can be, and leaves every other block to Python."""

from __future__ import annotations

import math
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainsleuth.tools.logs import analyze, collect
from trainsleuth.tools.logs.collect import Collector
from trainsleuth.tools.logs.errors import ErrorScanner
from trainsleuth.tools.logs.formats.csvfile import ARROW_MIN_BYTES, read_csv
from trainsleuth.tools.logs.source import ReadContext, ReadStats

DATA = Path(__file__).parent / "data" / "logs"


def _read(path: Path, fast: bool) -> tuple[Collector, ReadStats]:
    """Read with pyarrow converting every block it can (fast) or with Python alone."""
    collector = Collector()
    stats = ReadStats()
    read_csv(path, ReadContext(collector, ErrorScanner(), stats), path.stat().st_size, arrow=fast)
    collector.finish()
    return collector, stats


def _state(collector: Collector, stats: ReadStats) -> dict[str, Any]:
    def norm(xs: list[float]) -> list[Any]:
        return ["nan" if isinstance(x, float) and math.isnan(x) else x for x in xs]

    out: dict[str, Any] = {
        "records": collector.records,
        "last_step": collector.last_step,
        "position_steps": collector.position_steps,
        "lines": stats.lines,
        "bytes": stats.bytes_read,
    }
    for name, s in collector.series.items():
        steps, means, maxs, mins = s.timeline()
        out[name] = {
            "role": s.role,
            "summary": s.summary(),
            "timeline": (norm(steps), norm(means), norm(maxs), norm(mins)),
            "segments": [seg.as_dict() for seg in s.segments],
            "nonfinite": (s.nonfinite, s.nonfinite_first_step, s.nonfinite_examples),
            "positional": s.step_from_position,
        }
    return out


def _same(path: Path, arrow_blocks: int | None = None) -> dict[str, Any]:
    """Read both ways; pyarrow must convert blocks (all of them unless `arrow_blocks` says how
    many) and the results must agree in every detail."""
    fast_c, fast_s = _read(path, fast=True)
    slow_c, slow_s = _read(path, fast=False)
    assert slow_s.reader == "python" and slow_s.arrow_blocks == 0
    if arrow_blocks is None:
        assert fast_s.arrow_blocks >= 1, f"pyarrow converted no block of {path.name}"
    else:
        assert fast_s.arrow_blocks == arrow_blocks
    assert fast_s.reader == ("pyarrow" if fast_s.arrow_blocks else "python")
    fast, slow = _state(fast_c, fast_s), _state(slow_c, slow_s)
    assert fast == slow
    assert list(fast_c.series) == list(slow_c.series)  # same names in the same order
    return fast


def test_lightning_sparse_columns_and_keras(tmp_path: Path) -> None:
    st = _same(DATA / "lightning_metrics.csv")
    assert st["val_loss"]["timeline"][0] == [200.0, 400.0, 600.0]
    assert st["lr-Adam"]["role"] == "lr" and len(st["train_loss"]["timeline"][0]) == 60
    st = _same(DATA / "keras_training.csv")
    assert st["loss"]["timeline"][0][:3] == [0.0, 1.0, 2.0]


def test_tsv_nan_inf_and_empty_cells(tmp_path: Path) -> None:
    p = tmp_path / "m.tsv"
    rows = ["step\tloss\tval_loss\tgrad_norm"]
    rows += [f"{i}\t{2 - i / 100:.3f}\t\t{1 + i % 3}" for i in range(40)]
    rows += ["40\tnan\t1.5\tinf", "41\t\t1.4\t-inf", "42\tNaN\t\t1e400", "43\t1.1\t1.3\t-nan"]
    p.write_text("\n".join(rows) + "\n")
    st = _same(p)
    assert st["loss"]["nonfinite"][0] == 2 and st["loss"]["nonfinite"][1] == 40.0
    assert st["val_loss"]["timeline"][0] == [40.0, 41.0, 43.0]
    assert st["grad_norm"]["nonfinite"][0] == 4


def test_text_and_quoted_columns(tmp_path: Path) -> None:
    p = tmp_path / "m.csv"
    rows = ["step,loss,run,note"] + [f'{i},{2 - i / 100:.3f},baseline,"a, b"' for i in range(30)]
    p.write_text("\n".join(rows) + "\n")
    st = _same(p, arrow_blocks=0)  # quoted cells: row by row
    assert set(st) - {"records", "last_step", "position_steps", "lines", "bytes"} == {"loss"}
    q = tmp_path / "percent.csv"  # a text column with numbers in some rows ("12%" is read as 12)
    q.write_text(
        "step,loss,acc\n"
        + "".join(f"{i},{1 / (i + 1):.4f},{'n/a' if i % 3 else f'{i}%'}\n" for i in range(50))
    )
    st = _same(q, arrow_blocks=0)  # text cells: row by row
    assert st["acc"]["timeline"][0][:2] == [0.0, 3.0]


def test_crlf_rows_without_steps_and_restarts_over_many_blocks(tmp_path: Path) -> None:
    rng = random.Random(3)
    p = tmp_path / "big.csv"
    lines = ["step,train_loss,val_loss,lr"]
    step = 0
    for i in range(30000):  # about 1 MB: several of the Python reader's blocks, > 4096 points
        step = step + 1 if i != 12000 else 5000  # a restart: steps go back
        cell = "" if i == 20000 else str(step)  # one row without a step: that block is positional
        val = f"{rng.random():.4f}" if i % 250 == 0 else ""
        lines.append(f"{cell},{2 + rng.gauss(0, 0.1):.5f},{val},3e-4")
    p.write_text("\n".join(lines) + "\n")
    st = _same(p)
    assert st["train_loss"]["summary"]["segments"] >= 2 and st["train_loss"]["positional"]
    q = tmp_path / "crlf.csv"
    q.write_bytes(b"".join(ln + b"\r\n" for ln in p.read_bytes().split(b"\n")[:8000]))
    _same(q, arrow_blocks=0)
    r = tmp_path / "nostep.csv"
    r.write_text("loss,acc\n" + "".join(f"{1 / (i + 1):.4f},{i / 9000:.4f}\n" for i in range(9000)))
    st = _same(r)
    assert st["loss"]["positional"]
    assert (st["loss"]["summary"]["first_step"], st["loss"]["summary"]["last_step"]) == (1, 9000)


def test_blocks_pyarrow_cannot_read_fall_back_to_python(tmp_path: Path) -> None:
    ragged = tmp_path / "ragged.csv"
    ragged.write_text(
        "step,loss,lr\n" + "".join(f"{i},{1 / (i + 1):.3f},0.1\n" for i in range(20)) + "20,0.5\n21,0.4,0.1\n"
    )
    _same(ragged, arrow_blocks=0)
    c, _ = _read(ragged, fast=True)
    assert c.series["loss"].summary()["points"] == 22 and c.series["lr"].summary()["points"] == 21
    blank = tmp_path / "blank.csv"  # pyarrow would make the blank line a row of empty cells
    blank.write_text("step,loss\n1,2.0\n\n2,1.9\n")
    _same(blank, arrow_blocks=0)
    odd = tmp_path / "odd.csv"  # pyarrow reads nan(1) as NaN, float() refuses it
    odd.write_text("step,loss\n1,2.0\n2,nan(1)\n3,1.8\n")
    st = _same(odd, arrow_blocks=0)
    assert st["loss"]["nonfinite"][0] == 0 and st["loss"]["summary"]["points"] == 2
    late_text = tmp_path / "late_text.csv"  # text in a numeric column in the second block only
    late_text.write_text(
        "step,loss\n" + "".join(f"{i},{1 / (i + 1):.5f}\n" for i in range(20000)) + "20000,oops\n"
    )
    _same(late_text, arrow_blocks=1)


def test_mixed_blocks_are_fed_in_file_order(tmp_path: Path) -> None:
    """Blocks of 64 KiB, 256 KiB, 1 MiB, 4 MiB, then the rest: the third holds a quoted cell and the
    fourth a text cell (Python reads both), the others go to pyarrow, one block ahead."""
    rng = random.Random(5)
    p = tmp_path / "mixed.csv"
    rows = ["step,loss,grad_norm,lr"]
    size = i = 0
    while size < 6_500_000:
        i += 1
        cells = [str(i), f"{3 / (1 + i / 5e4) + rng.gauss(0, 0.02):.6f}", f"{rng.lognormvariate(0, 0.3):.4g}"]
        if i == 40_000:
            cells[2] = '"1.5"'
        if i == 150_000:
            cells[2] = "n/a"
        rows.append(",".join([*cells, "3e-4" if i % 7 else ""]))
        size += len(rows[-1]) + 1
    p.write_text("\n".join(rows) + "\n")
    st = _same(p, arrow_blocks=3)
    assert st["loss"]["summary"]["points"] == i and st["lr"]["summary"]["points"] == i - i // 7
    assert st["grad_norm"]["summary"]["points"] == i - 1  # "n/a" is not a value


_CELLS = st.one_of(
    st.sampled_from(["nan", "-nan", "NaN", "inf", "-inf", "Infinity", "+1", ".5", "5.", "1e5", "1E-5", "1_0",
                     "0x10", "1e", "-", " 2", "3 ", "nan(2)", "1e400", "-0", "", "4.9e-324", "1.5%"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda x: f"{x:.6g}"),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda x: f"{x:.17e}"),
    st.text(alphabet="0123456789.eE+-naifINty_ x()", min_size=1, max_size=8),
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.lists(_CELLS, min_size=3, max_size=3), min_size=1, max_size=40),
       with_step=st.booleans())  # fmt: skip
def test_any_cells_read_the_same_both_ways(tmp_path: Path, rows: list[list[str]], with_step: bool) -> None:
    p = tmp_path / "cells.csv"
    header = "step,a,b" if with_step else "x,a,b"
    p.write_text(header + "\n" + "".join(",".join(r) + "\n" for r in rows))
    fast_c, fast_s = _read(p, fast=True)
    slow_c, slow_s = _read(p, fast=False)
    assert _state(fast_c, fast_s) == _state(slow_c, slow_s)


def _plain_csv(path: Path) -> None:
    rows = ["step,train_loss,grad_norm,lr"]
    i = total = 0
    while total < ARROW_MIN_BYTES + 10_000:
        i += 1
        rows.append(f"{i},{2 + 5 / (1 + i / 1e4):.6f},{1 + (i % 7) / 10:.4f},3.000000e-04")
        total += len(rows[-1]) + 1
    rows[5000] = "5000,9.5,40.0,3.000000e-04"  # a spike
    path.write_text("\n".join(rows) + "\n")


def test_plain_numeric_csv_takes_the_fast_path(tmp_path: Path) -> None:
    p = tmp_path / "metrics.csv"
    _plain_csv(p)
    collector, _, stats = collect(p)
    assert stats.reader == "pyarrow" and stats.format == "csv"
    slow_c, slow_s = _read(p, fast=False)
    assert _state(collector, stats) == _state(slow_c, slow_s)
    report = analyze(p)
    spikes = [e for e in report.events if e.code == "loss_spike"]
    assert spikes and spikes[0].step == 5000


def test_without_pyarrow_the_python_reader_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "metrics.csv"
    _plain_csv(p)
    for mod in [m for m in sys.modules if m == "pyarrow" or m.startswith("pyarrow.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    collector, _, stats = collect(p)
    assert stats.reader == "python"
    assert collector.series["train_loss"].summary()["max_step"] == 5000


def test_folder_of_csv_files_reads_each_with_its_prefix(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    _plain_csv(run / "a.csv")
    shutil.copy(run / "a.csv", run / "b.csv")
    c, _, stats = collect(run)
    assert stats.format == "folder"
    assert {"a.csv:train_loss", "b.csv:train_loss"} <= set(c.series)
    a, b = c.series["a.csv:train_loss"].summary(), c.series["b.csv:train_loss"].summary()
    assert {**a, "name": ""} == {**b, "name": ""} and a["max_step"] == 5000


def test_the_fast_path_does_not_import_pandas(tmp_path: Path) -> None:
    """pyarrow's to_numpy/fill_null import pandas when it is installed (0.6 s or more); the CSV
    path reads arrow buffers directly instead."""
    import subprocess

    p = tmp_path / "metrics.csv"
    _plain_csv(p)
    code = (
        "import sys\n"
        "from trainsleuth.tools.logs import collect\n"
        "c, _, stats = collect(sys.argv[1])\n"
        "assert stats.reader == 'pyarrow', stats.reader\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

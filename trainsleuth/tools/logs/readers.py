"""Find what a path holds and send it to the reader of its format: text logs, CSV/TSV, HF
`trainer_state.json`, TensorBoard event files, MLflow run folders, or a small folder of logs.

Dispatch only: each format's reader lives in `formats/`, safe file access in `source`, the folder
walk in `folders`. Memory stays bounded by the kept points: files are streamed in blocks of whole
lines, never loaded whole (except `trainer_state.json`, which is size-checked first)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from trainsleuth.tools.logs.collect import Collector
from trainsleuth.tools.logs.errors import ErrorScanner
from trainsleuth.tools.logs.folders import MAX_DIR_ENTRIES, walk
from trainsleuth.tools.logs.formats.csvfile import read_csv
from trainsleuth.tools.logs.formats.mlflow import read_mlflow
from trainsleuth.tools.logs.formats.tensorboard import read_tensorboard
from trainsleuth.tools.logs.formats.textlog import read_text
from trainsleuth.tools.logs.formats.trainer_state import read_trainer_state
from trainsleuth.tools.logs.series import DEFAULT_CAPACITY
from trainsleuth.tools.logs.source import (
    LogInputError,
    Progress,
    ReadContext,
    ReadStats,
    kind_of,
    looks_binary,
    sniff,
)
from trainsleuth.tools.logs.textparse import to_float

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

__all__ = ["FORMATS", "LogInputError", "Progress", "ReadContext", "ReadStats", "collect", "read_path"]


def collect(path: Path, fmt: str = "auto", *, capacity: int = DEFAULT_CAPACITY, progress: Progress | None = None,
            cancel: threading.Event | None = None, roots: list[Path] | None = None,
            step_key: str | None = None) -> tuple[Collector, ErrorScanner, ReadStats]:  # fmt: skip
    """Read `path` (file or run folder) into bounded series and error lines, without analysis.
    `roots`: where symlinks inside a run folder may lead (None: anywhere); `step_key`: the key
    that holds the step (the user's correction; None: found per format)."""
    collector = Collector(capacity)
    errors = ErrorScanner()
    stats = ReadStats()
    read_path(Path(path), fmt, ReadContext(collector, errors, stats, progress, cancel, roots, step_key))
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
            f"{path} is {kind_of(st.st_mode)}, not a regular file; it cannot be analysed as a log",
            "save the log to a regular file and pass that file",
        )
    _read_file(path, fmt, ctx, st.st_size)


def _base_name(name: str) -> str:
    """The name without a compression suffix: `train.log.gz` -> `train.log`."""
    return name[:-3] if name.endswith(".gz") else name


def _read_file(path: Path, fmt: str, ctx: ReadContext, size: int) -> None:
    name = _base_name(path.name.lower())
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
        ctx.stats.note("the file is empty")
        return
    head = sniff(path)
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


def _mlflow_runs(path: Path, files: list[Path]) -> dict[Path, list[Path]]:
    """MLflow runs under `path` (the folder itself, or runs inside an `mlruns/` tree): run folder
    -> its metric files. A run folder has `metrics/` (metric names with `/` nest inside it)."""
    runs: dict[Path, list[Path]] = {}
    for f in files:
        parts = f.relative_to(path).parts
        if "metrics" not in parts[:-1]:
            continue
        k = parts.index("metrics")
        run = path.joinpath(*parts[:k])
        if k == 0 or (run / "meta.yaml").is_file():
            runs.setdefault(run, []).append(f)
    return runs


def _read_dir(path: Path, fmt: str, ctx: ReadContext) -> None:
    found = walk(path, ctx.roots)
    for note in found.notes():
        ctx.stats.note(note)
    tfevents = [p for p in found.files if "tfevents" in p.name]
    entries = [p for p in found.files if "tfevents" not in p.name]
    if fmt in ("tensorboard", "auto") and tfevents:
        ctx.stats.format = "tensorboard"
        ctx.stats.files.extend(str(p) for p in tfevents[:20])
        read_tensorboard(tfevents, ctx, path)
        return
    if fmt == "tensorboard":
        raise LogInputError(
            f"{path} holds no TensorBoard event files (*tfevents*)", "pass the log dir of the run"
        )
    runs = _mlflow_runs(path, entries)
    if fmt in ("mlflow", "auto") and runs:
        if len(runs) > 1:
            shown = ", ".join(r.relative_to(path).as_posix() or "." for r in list(runs)[:5])
            raise LogInputError(
                f"{path} holds {len(runs)} MLflow runs ({shown}); one analysis reads one run",
                "pass one run folder (the one with metrics/ inside)",
            )
        run_dir, files = next(iter(runs.items()))
        ctx.stats.format = "mlflow"
        ctx.stats.files.append(str(run_dir / "metrics"))
        if run_dir != path:
            ctx.stats.note(f"read the MLflow run {run_dir.relative_to(path).as_posix()}")
        read_mlflow(run_dir / "metrics", files, ctx)
        return
    if fmt == "mlflow":
        raise LogInputError(f"{path} is not an MLflow run folder (no metrics/ inside)", "pass the run folder")
    entries = [p for p in entries if "metrics" not in p.relative_to(path).parts[:-1]]
    states = [p for p in entries if p.name == "trainer_state.json"]
    if states and fmt in ("auto", "trainer_state"):
        best = max(states, key=lambda p: p.stat().st_mtime)
        ctx.stats.format = "trainer_state"
        ctx.stats.files.append(str(best))
        if len(states) > 1:
            ctx.stats.note(f"read the newest trainer_state.json of {len(states)} in the folder")
        read_trainer_state(best, ctx, best.stat().st_size)
        return
    logs = [p for p in entries if Path(_base_name(p.name.lower())).suffix in TEXT_SUFFIXES]
    if found.truncated or len(logs) > MAX_LOG_FILES:
        shown = ", ".join(p.relative_to(path).as_posix() for p in logs[:5])
        raise LogInputError(
            f"{path} holds {'more than ' if found.truncated else ''}"
            f"{len(logs) if not found.truncated else MAX_DIR_ENTRIES} "
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
        sub = ReadContext(
            ctx.collector, ctx.errors, ReadStats(), ctx.progress, ctx.cancel, ctx.roots, ctx.step_key
        )
        try:
            size = os.stat(p).st_size
            head = sniff(p) if size else b""
            name = _base_name(p.name.lower())
            if not size or looks_binary(head):
                continue
            if _is_csv(name, head):
                read_csv(p, sub, size, prefix)
            elif _is_trainer_state(name, head):
                read_trainer_state(p, sub, size)
            else:
                read_text(p, fmt if fmt != "auto" else "auto", sub, size, prefix)
        except LogInputError as exc:
            ctx.stats.note(exc.message)
            continue
        ctx.stats.files.append(str(p))
        ctx.stats.bytes_read += sub.stats.bytes_read
        ctx.stats.lines += sub.stats.lines
        ctx.stats.long_lines_skipped += sub.stats.long_lines_skipped
        ctx.stats.undecodable_lines += sub.stats.undecodable_lines
        ctx.stats.skipped.update(sub.stats.skipped)
        for why, example in sub.stats.skipped_example.items():
            ctx.stats.skipped_example.setdefault(why, example)
        for note in sub.stats.notes:
            ctx.stats.note(f"{p.name}: {note}")

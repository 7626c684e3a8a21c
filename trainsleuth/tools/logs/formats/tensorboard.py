"""TensorBoard event files, read with tensorboard's own loader (scalars and scalar tensors)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from trainsleuth.tools.logs.source import LogInputError, ReadContext, kind_of


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
        try:  # tensorboard opens the file itself: make sure it is a regular file first
            mode = os.stat(fpath).st_mode
        except OSError as exc:
            ctx.stats.note(f"{fpath.name}: cannot be read ({exc.strerror or exc})")
            continue
        if not stat.S_ISREG(mode):
            ctx.stats.note(f"{fpath.name}: skipped, it is {kind_of(mode)}, not a regular file")
            continue
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

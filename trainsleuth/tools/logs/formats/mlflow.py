"""MLflow run folders: `metrics/<name>` files of `timestamp value step` lines (names may contain '/')."""

from __future__ import annotations

from pathlib import Path

from trainsleuth.tools.logs.source import LogInputError, ReadContext, iter_lines
from trainsleuth.tools.logs.textparse import to_float


def read_mlflow(metrics_dir: Path, files: list[Path], ctx: ReadContext) -> None:
    """`files`: the regular files under `metrics_dir` (found by the folder walker, which skips
    FIFOs, devices and symlinks that lead elsewhere)."""
    for p in files:
        ctx.check_cancel()
        name = p.relative_to(metrics_dir).as_posix()
        try:
            size = p.stat().st_size
            for line in iter_lines(p, ctx, size):
                parts = line.split()
                if len(parts) < 2:
                    continue
                v = to_float(parts[1])
                if v is None:
                    continue
                step = to_float(parts[2]) if len(parts) > 2 else None
                ctx.collector.add(step, {name: v})
        except (OSError, LogInputError) as exc:
            ctx.stats.note(f"{name}: skipped ({getattr(exc, 'message', None) or exc})")

"""Plain-text experiment logging: one line per event, optionally mirrored to a file."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TextIO


class RunLogger:
    def __init__(self, out_dir: str | Path | None = None, quiet: bool = False) -> None:
        self.quiet = quiet
        self.start = time.monotonic()
        self._file: TextIO | None = None
        if out_dir is not None:
            out = Path(out_dir)
            out.mkdir(parents=True, exist_ok=True)
            self._file = open(out / "train.log", "a", encoding="utf-8")

    def info(self, message: str) -> None:
        line = f"[{time.monotonic() - self.start:7.1f}s] {message}"
        if not self.quiet:
            print(line, file=sys.stdout, flush=True)
        if self._file:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file:
            self._file.close()

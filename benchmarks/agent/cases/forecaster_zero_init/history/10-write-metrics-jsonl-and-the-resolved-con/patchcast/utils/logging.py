"""Plain-text experiment logging: one line per event, optionally mirrored to a file."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO


class RunLogger:
    def __init__(self, out_dir: str | Path | None = None, quiet: bool = False) -> None:
        self.quiet = quiet
        self.start = time.monotonic()
        self._file: TextIO | None = None
        self._jsonl: TextIO | None = None
        if out_dir is not None:
            out = Path(out_dir)
            out.mkdir(parents=True, exist_ok=True)
            self._file = open(out / "train.log", "a", encoding="utf-8")
            self._jsonl = open(out / "metrics.jsonl", "a", encoding="utf-8")

    def info(self, message: str) -> None:
        line = f"[{time.monotonic() - self.start:7.1f}s] {message}"
        if not self.quiet:
            print(line, file=sys.stdout, flush=True)
        if self._file:
            self._file.write(line + "\n")
            self._file.flush()

    def metrics(self, step: int, **values: Any) -> None:
        if self._jsonl:
            self._jsonl.write(json.dumps({"step": step, **values}) + "\n")
            self._jsonl.flush()

    def close(self) -> None:
        for handle in (self._file, self._jsonl):
            if handle:
                handle.close()

"""CSV logging of training metrics."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, TextIO


class CSVLogger:
    def __init__(self, path: str | Path | None) -> None:
        self._handle: TextIO | None = None
        self._writer: csv.DictWriter | None = None
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._handle = open(path, "w", newline="")

    def log(self, row: dict[str, Any]) -> None:
        if self._handle is None:
            return
        if self._writer is None:
            self._writer = csv.DictWriter(self._handle, fieldnames=list(row), extrasaction="ignore")
            self._writer.writeheader()
        self._writer.writerow(row)
        self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()


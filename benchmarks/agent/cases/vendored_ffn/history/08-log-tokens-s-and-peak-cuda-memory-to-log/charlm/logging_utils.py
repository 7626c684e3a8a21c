"""Console + CSV logging and a throughput meter."""

from __future__ import annotations

import csv
import time
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


class Throughput:
    """Tokens per second over the steps since the last call to ``rate``."""

    def __init__(self) -> None:
        self._t = time.perf_counter()
        self._tokens = 0

    def add(self, tokens: int) -> None:
        self._tokens += tokens

    def rate(self) -> float:
        now = time.perf_counter()
        value = self._tokens / max(now - self._t, 1e-9)
        self._t, self._tokens = now, 0
        return value


def peak_memory_mb() -> float | None:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return None

"""Sliding windows over a ``(time, channels)`` series, split chronologically.

Channel-independent models treat every channel of every window as its own sample, so a window of
shape ``(lookback, C)`` becomes ``C`` univariate samples. ``SlidingWindows`` yields ``(x, y)`` with
``x: (lookback, C)`` and ``y: (horizon, C)``; the model flattens channels itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.data import Dataset


@dataclass(frozen=True)
class SplitBounds:
    train_end: int
    val_end: int
    length: int


def chronological_split(length: int, val_frac: float, test_frac: float, lookback: int) -> SplitBounds:
    """Train | val | test in time order; val and test windows may look back into the previous part."""
    if not 0 < val_frac < 1 or not 0 < test_frac < 1 or val_frac + test_frac >= 1:
        raise ValueError(f"bad split fractions val={val_frac} test={test_frac}")
    test_start = int(length * (1 - test_frac))
    val_start = int(length * (1 - test_frac - val_frac))
    if val_start <= lookback:
        raise ValueError(f"series of length {length} too short for lookback {lookback}")
    return SplitBounds(train_end=val_start, val_end=test_start, length=length)


class SlidingWindows(Dataset):
    def __init__(
        self, series: torch.Tensor, start: int, end: int, lookback: int, horizon: int, stride: int = 1
    ) -> None:
        if series.dim() != 2:
            raise ValueError(f"series must be (time, channels), got {tuple(series.shape)}")
        self.series = series
        self.lookback = lookback
        self.horizon = horizon
        # a window's targets lie in [start, end); its inputs may reach back before start
        first = max(start, lookback)
        self.starts = list(range(first - lookback, end - lookback - horizon + 1, stride))
        if not self.starts:
            raise ValueError(f"no windows fit in [{start}, {end}) with lookback {lookback}, horizon {horizon}")

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.starts[index]
        x = self.series[s : s + self.lookback]
        y = self.series[s + self.lookback : s + self.lookback + self.horizon]
        return x, y

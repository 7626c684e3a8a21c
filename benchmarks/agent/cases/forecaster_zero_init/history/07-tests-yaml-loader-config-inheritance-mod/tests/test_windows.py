import pytest
import torch

from patchcast.data.windows import SlidingWindows, chronological_split


def test_windows_are_aligned():
    series = torch.arange(100.0).unsqueeze(1)
    ds = SlidingWindows(series, 0, 60, lookback=10, horizon=5)
    x, y = ds[0]
    assert x[-1, 0] + 1 == y[0, 0]
    assert all(s + 15 <= 60 for s in ds.starts)


def test_split_order():
    b = chronological_split(1000, 0.1, 0.2, lookback=96)
    assert b.train_end == 700 and b.val_end == 800


def test_too_short():
    with pytest.raises(ValueError):
        chronological_split(100, 0.1, 0.2, lookback=96)

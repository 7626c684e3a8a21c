"""Build train/val/test loaders from a data config."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader

from patchcast.config import DataConfig
from patchcast.data import synthetic  # noqa: F401  (registers the generators)
from patchcast.data.scalers import StandardScaler
from patchcast.data.windows import SlidingWindows, chronological_split
from patchcast.registry import DATASETS


@dataclass
class DataBundle:
    train: DataLoader
    val: DataLoader
    test: DataLoader
    scaler: StandardScaler
    n_channels: int


def build_loaders(cfg: DataConfig, lookback: int, horizon: int, generator: torch.Generator) -> DataBundle:
    series = DATASETS.get(cfg.name)(**cfg.params)
    bounds = chronological_split(len(series), cfg.val_frac, cfg.test_frac, lookback)
    scaler = StandardScaler().fit(series[: bounds.train_end])
    scaled = scaler.transform(series) if cfg.scale else series

    def windows(start: int, end: int, stride: int) -> SlidingWindows:
        return SlidingWindows(scaled, start, end, lookback, horizon, stride)

    train = windows(0, bounds.train_end, cfg.train_stride)
    val = windows(bounds.train_end, bounds.val_end, cfg.eval_stride)
    test = windows(bounds.val_end, bounds.length, cfg.eval_stride)
    return DataBundle(
        train=DataLoader(train, batch_size=cfg.batch_size, shuffle=True, generator=generator, drop_last=True),
        val=DataLoader(val, batch_size=cfg.eval_batch_size),
        test=DataLoader(test, batch_size=cfg.eval_batch_size),
        scaler=scaler,
        n_channels=series.shape[1],
    )

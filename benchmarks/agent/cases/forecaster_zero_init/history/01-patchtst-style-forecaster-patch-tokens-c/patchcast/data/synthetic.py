"""Synthetic multivariate series with known structure, for quick experiments and tests.

The generators return a float tensor of shape ``(length, n_channels)``. Each channel is generated
independently, which matches the channel-independent models in this package.
"""

from __future__ import annotations

import math

import torch

from patchcast.registry import DATASETS


def _smooth_motif(period: int, n_harmonics: int, gen: torch.Generator) -> torch.Tensor:
    t = torch.arange(period, dtype=torch.float32) / period
    motif = torch.zeros(period)
    for k in range(1, n_harmonics + 1):
        amp = torch.randn((), generator=gen) / k
        phase = 2 * math.pi * torch.rand((), generator=gen)
        motif += amp * torch.sin(2 * math.pi * k * t + phase)
    return motif / motif.std().clamp_min(1e-3)


@DATASETS.register("seasonal_mix")
def seasonal_mix(
    length: int = 2048,
    n_channels: int = 16,
    min_period: int = 12,
    max_period: int = 48,
    n_harmonics: int = 4,
    trend_scale: float = 0.02,
    modulation: float = 0.0,
    noise: float = 0.1,
    seed: int = 0,
) -> torch.Tensor:
    """Each channel repeats its own motif with its own period, on a slow random-walk trend.

    ``modulation`` > 0 multiplies the motif by a slowly varying positive envelope.
    """
    gen = torch.Generator().manual_seed(seed)
    out = torch.empty(length, n_channels)
    t = torch.arange(length, dtype=torch.float32)
    for c in range(n_channels):
        period = int(torch.randint(min_period, max_period + 1, (), generator=gen))
        motif = _smooth_motif(period, n_harmonics, gen)
        reps = motif.repeat(length // period + 1)[:length]
        if modulation > 0:
            slow = 1.0 / (150 + 250 * torch.rand((), generator=gen))
            phase = 2 * math.pi * torch.rand((), generator=gen)
            reps = reps * torch.exp(modulation * torch.sin(2 * math.pi * slow * t + phase))
        trend = torch.cumsum(trend_scale * torch.randn(length, generator=gen), 0)
        level = 2.0 * torch.randn((), generator=gen)
        out[:, c] = level + reps + trend + noise * torch.randn(length, generator=gen)
    return out


@DATASETS.register("sine_bank")
def sine_bank(length: int = 2048, n_channels: int = 8, noise: float = 0.05, seed: int = 0) -> torch.Tensor:
    """Sums of two sines per channel with random frequencies: a sanity-check dataset."""
    gen = torch.Generator().manual_seed(seed)
    t = torch.arange(length, dtype=torch.float32)
    out = torch.empty(length, n_channels)
    for c in range(n_channels):
        f1, f2 = 1.0 / (8 + 56 * torch.rand(2, generator=gen))
        out[:, c] = torch.sin(2 * math.pi * f1 * t) + 0.5 * torch.sin(2 * math.pi * f2 * t)
        out[:, c] += noise * torch.randn(length, generator=gen)
    return out


@DATASETS.register("random_walk")
def random_walk(length: int = 2048, n_channels: int = 8, seed: int = 0) -> torch.Tensor:
    """Pure random walks: nothing beats the naive forecast here (used in tests of the metrics)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.cumsum(torch.randn(length, n_channels, generator=gen), 0)

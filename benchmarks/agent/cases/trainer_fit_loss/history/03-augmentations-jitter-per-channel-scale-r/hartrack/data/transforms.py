"""Augmentations for IMU windows ``(6, T)``; each takes a generator so runs are reproducible."""

from __future__ import annotations

import math

import torch


class Compose:
    def __init__(self, transforms: list) -> None:
        self.transforms = transforms

    def __call__(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        for transform in self.transforms:
            x = transform(x, gen)
        return x


class Jitter:
    def __init__(self, sigma: float = 0.02) -> None:
        self.sigma = sigma

    def __call__(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        return x + self.sigma * torch.randn(x.shape, generator=gen)


class Scale:
    """Multiply each channel by a factor near 1 (sensor gain differences)."""

    def __init__(self, sigma: float = 0.1) -> None:
        self.sigma = sigma

    def __call__(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        return x * (1 + self.sigma * torch.randn(x.shape[0], 1, generator=gen))


class Rotate:
    """Rotate accelerometer and gyroscope together by a small random rotation about z (watch fit)."""

    def __init__(self, max_degrees: float = 15.0) -> None:
        self.max_radians = math.radians(max_degrees)

    def __call__(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        angle = float((torch.rand((), generator=gen) * 2 - 1) * self.max_radians)
        c, s = math.cos(angle), math.sin(angle)
        rot = torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        return torch.cat([rot @ x[:3], rot @ x[3:]])


class TimeShift:
    def __init__(self, max_shift: int = 16) -> None:
        self.max_shift = max_shift

    def __call__(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        shift = int(torch.randint(-self.max_shift, self.max_shift + 1, (), generator=gen))
        return torch.roll(x, shift, dims=-1)


def build_transforms(names: list[str]) -> Compose | None:
    table = {"jitter": Jitter, "scale": Scale, "rotate": Rotate, "shift": TimeShift}
    unknown = [n for n in names if n not in table]
    if unknown:
        raise ValueError(f"unknown augmentation(s) {unknown}; known: {sorted(table)}")
    return Compose([table[n]() for n in names]) if names else None

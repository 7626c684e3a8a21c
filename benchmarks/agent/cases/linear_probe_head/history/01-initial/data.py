"""Synthetic sensor windows: each activity class is a noisy prototype signal."""

import torch


def make_windows(n: int, num_classes: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(num_classes, 32, generator=torch.Generator().manual_seed(7)) * 1.5
    y = torch.randint(0, num_classes, (n,), generator=g)
    return protos[y] + torch.randn(n, 32, generator=g), y

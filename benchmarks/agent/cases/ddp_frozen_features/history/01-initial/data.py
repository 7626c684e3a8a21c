"""Synthetic signals: 5 classes separated by a non-linear boundary in 16 dimensions."""

import torch


def global_batch(step: int, size: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(step)
    x = torch.randn(size, 16, generator=g)
    score = torch.stack([x[:, 0] * x[:, 1], x[:, 2] ** 2 - 1, torch.sin(2 * x[:, 3]), x[:, 4] - x[:, 5], x[:, 6]], 1)
    return x, score.argmax(1)

"""Synthetic house table: 8 standardized features, target = log price (standardized)."""

import torch


def make_houses(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    w = torch.tensor([0.9, -0.5, 0.3, 0.0, 0.7, -0.2, 0.4, 0.1])
    y = x @ w + 0.3 * torch.sin(2 * x[:, 0]) + 0.1 * torch.randn(n, generator=g)
    return x, (y - y.mean()) / y.std()

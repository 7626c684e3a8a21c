"""Synthetic 'strokes' dataset: 10 classes of 64-dim feature vectors around class prototypes."""

import torch


def make_split(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(10, 64, generator=torch.Generator().manual_seed(3))
    y = torch.randint(0, 10, (n,), generator=g)
    return protos[y] + 2.0 * torch.randn(n, 64, generator=g), y

"""Synthetic stand-in for the churn table: 12 features of very different scales, binary label."""

import torch

N_FEATURES = 12
SCALES = torch.tensor([1.0, 3.0, 0.5, 10.0, 1.0, 2.0, 0.2, 5.0, 1.0, 1.0, 4.0, 0.8])


def make_table(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, N_FEATURES, generator=g)
    w = torch.randn(N_FEATURES, generator=torch.Generator().manual_seed(1234))
    logits = x @ w + 0.5 * x[:, 0] * x[:, 1]
    y = (logits + 0.3 * torch.randn(n, generator=g) > 0).long()
    return x * SCALES, y


def load_splits(seed: int = 0) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    x, y = make_table(6000, seed)
    return {"train": (x[:5000], y[:5000]), "val": (x[5000:], y[5000:])}

"""Synthetic vehicle tracks in a local metric frame (metres east/north of the depot, up to 6 km away).

Each sample is two consecutive GPS fixes one second apart; the target is the velocity in m/s.
"""

import torch


def make_fixes(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    start = 2000 + 4000 * torch.rand(n, 2, generator=g)
    velocity = 6 * torch.rand(n, 2, generator=g) - 3
    prev = start + 0.05 * torch.randn(n, 2, generator=g)
    cur = start + velocity + 0.05 * torch.randn(n, 2, generator=g)
    return prev, cur, velocity

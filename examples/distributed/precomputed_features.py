"""Features precomputed per rank: each rank embeds the raw data with its own, rank-seeded frozen
encoder before training, so the "global" batch the ranks shard is different on every rank. The
check compares the entrypoint's global batch across ranks before sharding.
"""

import os

import torch
from torch import nn


def _features(per_rank):
    torch.manual_seed(7 + (int(os.environ.get("RANK", "0")) if per_rank else 0))  # BUG when per_rank
    encoder = nn.Linear(8, 16).requires_grad_(False)
    torch.manual_seed(0)
    raw = torch.randn(8, 8)
    with torch.no_grad():
        return encoder(raw), raw.sum(dim=1, keepdim=True)


def entry(per_rank=True):
    feats, y = _features(per_rank)
    torch.manual_seed(0)
    model = nn.Linear(16, 1)
    return {
        "model": model,
        "batch": (feats, y),
        "loss_fn": lambda m, b: nn.functional.mse_loss(m(b[0]), b[1]),
    }


def healthy():
    return entry(per_rank=False)

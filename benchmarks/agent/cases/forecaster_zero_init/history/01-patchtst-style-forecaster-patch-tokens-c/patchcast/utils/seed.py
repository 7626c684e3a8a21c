"""Reproducibility helpers."""

from __future__ import annotations

import os
import random

import torch


def seed_everything(seed: int, deterministic: bool = False) -> torch.Generator:
    """Seed python and torch; returns a generator for data-side randomness (shuffling, noise)."""
    random.seed(seed)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))
    torch.manual_seed(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
    return torch.Generator().manual_seed(seed)

"""Split univariate series into (overlapping) patches and embed them as tokens (PatchTST)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def n_patches(lookback: int, patch_len: int, stride: int, pad_end: bool = True) -> int:
    """Number of patches; with ``pad_end`` the series is padded by ``stride`` repeated last values."""
    length = lookback + (stride if pad_end else 0)
    if length < patch_len:
        raise ValueError(f"lookback {lookback} is shorter than patch_len {patch_len}")
    return (length - patch_len) // stride + 1


class Patcher(nn.Module):
    def __init__(self, patch_len: int, stride: int, pad_end: bool = True) -> None:
        super().__init__()
        self.patch_len = patch_len
        self.stride = stride
        self.pad_end = pad_end

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, L)`` -> ``(B, N, patch_len)``."""
        if self.pad_end:
            x = F.pad(x.unsqueeze(1), (0, self.stride), mode="replicate").squeeze(1)
        return x.unfold(-1, self.patch_len, self.stride)


class PatchEmbedding(nn.Module):
    def __init__(self, patch_len: int, d_model: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.value = nn.Linear(patch_len, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, patches: torch.Tensor) -> torch.Tensor:
        return self.drop(self.value(patches))

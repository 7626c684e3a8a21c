# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Position information: absolute tables added to the embeddings, or relative schemes applied
inside attention (rotary embeddings, ALiBi biases)."""

from __future__ import annotations

import math

import torch
from torch import nn


# ---------------------------------------------------------------------- absolute
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len: int, dim: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.weight = nn.Parameter(torch.zeros(max_len, dim))

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        if int(positions.max()) >= self.max_len:
            raise IndexError(f"position {int(positions.max())} >= max_seq_len {self.max_len}")
        return self.weight[positions]


class SinusoidalPositionalEmbedding(nn.Module):
    def __init__(self, max_len: int, dim: int, base: float = 10000.0) -> None:
        super().__init__()
        self.max_len = max_len
        inv = torch.exp(-math.log(base) * torch.arange(0, dim, 2, dtype=torch.float32) / dim)
        pos = torch.arange(max_len, dtype=torch.float32)[:, None] * inv[None]
        table = torch.zeros(max_len, dim)
        table[:, 0::2] = torch.sin(pos)
        table[:, 1::2] = torch.cos(pos[:, : dim // 2])
        self.register_buffer("table", table, persistent=False)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return self.table[positions]


# ---------------------------------------------------------------------- rotary
class RotaryEmbedding(nn.Module):
    """Rotary position embedding (Su et al., 2021) on the first ``rot_dim`` channels of each head.

    cos/sin tables are cached up to the longest length seen and grown on demand.
    """

    def __init__(self, head_dim: int, pct: float = 1.0, base: float = 10000.0) -> None:
        super().__init__()
        self.rot_dim = int(head_dim * pct)
        if self.rot_dim % 2:
            raise ValueError("rotary dimension must be even")
        inv_freq = 1.0 / (base ** (torch.arange(0, self.rot_dim, 2, dtype=torch.float32) / self.rot_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self._cached_len = 0
        self._cos: torch.Tensor | None = None
        self._sin: torch.Tensor | None = None

    def _tables(self, length: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        if self._cos is None or length > self._cached_len or self._cos.device != device:
            t = torch.arange(max(length, 16), device=device, dtype=torch.float32)
            freqs = torch.outer(t, self.inv_freq.to(device))
            emb = torch.cat([freqs, freqs], dim=-1)
            self._cos, self._sin = emb.cos(), emb.sin()
            self._cached_len = t.numel()
        assert self._sin is not None
        return self._cos.to(dtype), self._sin.to(dtype)

    @staticmethod
    def _rotate_half(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([-x2, x1], dim=-1)

    def forward(self, q: torch.Tensor, k: torch.Tensor, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """``q, k: (B, H, T, D)``; ``offset`` is the position of the first query (kv-cache decoding)."""
        length = q.shape[-2] + offset
        cos, sin = self._tables(length, q.device, q.dtype)
        cos_q, sin_q = cos[offset:length], sin[offset:length]
        cos_k, sin_k = cos[length - k.shape[-2] : length], sin[length - k.shape[-2] : length]
        r = self.rot_dim

        def apply(x: torch.Tensor, c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
            rot, rest = x[..., :r], x[..., r:]
            return torch.cat([rot * c + self._rotate_half(rot) * s, rest], dim=-1)

        return apply(q, cos_q, sin_q), apply(k, cos_k, sin_k)


# ---------------------------------------------------------------------- alibi
def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Head-specific slopes (Press et al., 2022), for any number of heads."""

    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n_heads).is_integer():
        return torch.tensor(power_of_two(n_heads))
    closest = 2 ** math.floor(math.log2(n_heads))
    slopes = power_of_two(closest)
    extra = power_of_two(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes + extra)


class ALiBi(nn.Module):
    def __init__(self, n_heads: int) -> None:
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)

    def bias(self, q_len: int, k_len: int, device: torch.device) -> torch.Tensor:
        """``(H, q_len, k_len)`` additive bias: ``-slope * distance`` to earlier keys."""
        q_pos = torch.arange(k_len - q_len, k_len, device=device)[:, None]
        k_pos = torch.arange(k_len, device=device)[None, :]
        distance = (q_pos - k_pos).clamp_min(0).float()
        return -self.slopes.to(device)[:, None, None] * distance[None]


def build_absolute_positions(kind: str, max_len: int, dim: int) -> nn.Module | None:
    if kind == "learned":
        return LearnedPositionalEmbedding(max_len, dim)
    if kind == "sinusoidal":
        return SinusoidalPositionalEmbedding(max_len, dim)
    return None  # rotary / alibi / none act inside attention

# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Key/value cache for incremental decoding."""

from __future__ import annotations

import torch


class KVCache:
    """Preallocated per-layer key/value storage: ``(B, H_kv, max_len, D)`` each."""

    def __init__(
        self,
        n_layers: int,
        batch_size: int,
        n_kv_heads: int,
        head_dim: int,
        max_len: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        shape = (batch_size, n_kv_heads, max_len, head_dim)
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layers)]
        self.values = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layers)]
        self.max_len = max_len
        self.length = 0

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ``k, v`` for ``layer`` at the current length; returns everything cached so far."""
        t = k.shape[-2]
        end = self.length + t
        if end > self.max_len:
            raise RuntimeError(f"KV cache full: {end} > {self.max_len}")
        self.keys[layer][:, :, self.length : end] = k
        self.values[layer][:, :, self.length : end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def advance(self, n: int) -> None:
        """Called once per forward, after every layer has written its keys/values."""
        self.length += n

    def reset(self) -> None:
        self.length = 0

    def reorder(self, index: torch.Tensor) -> None:
        """Select batch rows (beam search)."""
        self.keys = [k.index_select(0, index) for k in self.keys]
        self.values = [v.index_select(0, index) for v in self.values]

# Copyright (c) 2024-2026 The lmblocks authors. Licensed under the MIT License (see LICENSE).
"""Transformer block: attention and feed-forward sublayers with residual connections.

Three layouts: pre-norm (GPT-2 and later), post-norm (original transformer), and the parallel
residual of GPT-J/PaLM (``x + attn(norm(x)) + ffn(norm(x))``).
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import CausalSelfAttention
from .cache import KVCache
from .configuration import LMConfig
from .feedforward import build_feedforward
from .normalization import build_norm


class LayerScale(nn.Module):
    """Per-channel learned scale of a residual branch (CaiT, Touvron et al. 2021)."""

    def __init__(self, dim: int, init: float) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), init))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma


class DropPath(nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.p == 0.0 or not self.training:
            return x
        keep = x.new_empty(x.shape[0], *([1] * (x.dim() - 1))).bernoulli_(1 - self.p)
        return x * keep / (1 - self.p)


class TransformerBlock(nn.Module):
    def __init__(self, config: LMConfig, layer_idx: int = 0) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.pre_norm = config.pre_norm
        self.parallel = config.parallel_residual
        self.norm_attn = build_norm(config.norm_type, config.d_model, config.norm_eps, config.bias)
        self.attn = CausalSelfAttention(config, layer_idx)
        self.norm_ffn = (
            None if self.parallel else build_norm(config.norm_type, config.d_model, config.norm_eps, config.bias)
        )
        self.ffn = build_feedforward(config)
        scale = config.layer_scale_init
        self.scale_attn = LayerScale(config.d_model, scale) if scale else nn.Identity()
        self.scale_ffn = LayerScale(config.d_model, scale) if scale else nn.Identity()
        rate = config.drop_path * layer_idx / max(config.n_layers - 1, 1)
        self.drop_path = DropPath(rate)

    def forward(
        self, x: torch.Tensor, attention_mask: torch.Tensor | None = None, cache: KVCache | None = None
    ) -> torch.Tensor:
        if self.parallel:
            h = self.norm_attn(x)
            attn = self.scale_attn(self.attn(h, attention_mask, cache))
            ffn = self.scale_ffn(self.ffn(h))
            return x + self.drop_path(attn + ffn)
        assert self.norm_ffn is not None
        if self.pre_norm:
            x = x + self.drop_path(self.scale_attn(self.attn(self.norm_attn(x), attention_mask, cache)))
            x = x + self.drop_path(self.scale_ffn(self.ffn(self.norm_ffn(x))))
            return x
        x = self.norm_attn(x + self.drop_path(self.scale_attn(self.attn(x, attention_mask, cache))))
        return self.norm_ffn(x + self.drop_path(self.scale_ffn(self.ffn(x))))
